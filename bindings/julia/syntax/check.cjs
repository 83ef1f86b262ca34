// Parses Julia files with tree-sitter's Julia grammar (web-tree-sitter in
// Node; no Julia runtime needed) and fails on any syntax error, naming the
// file, line and column. Usage: node check.cjs NODE_MODULES_DIR FILE.jl...
const path = require("path");
const fs = require("fs");

async function main() {
  const [modules, ...files] = process.argv.slice(2);
  const { Parser, Language } = require(path.join(modules, "web-tree-sitter", "web-tree-sitter.cjs"));
  await Parser.init();
  const julia = await Language.load(path.join(modules, "tree-sitter-julia", "tree-sitter-julia.wasm"));
  const parser = new Parser();
  parser.setLanguage(julia);
  let bad = 0;
  for (const f of files) {
    const tree = parser.parse(fs.readFileSync(f, "utf8"));
    const errors = [];
    const walk = (n) => {
      if (n.type === "ERROR" || n.isMissing) errors.push(n);
      else if (n.hasError) for (let i = 0; i < n.childCount; i++) walk(n.child(i));
    };
    walk(tree.rootNode);
    for (const e of errors.slice(0, 5)) {
      const p = e.startPosition;
      console.error(`${f}:${p.row + 1}:${p.column + 1}: syntax error near ${JSON.stringify(e.text.slice(0, 60))}`);
    }
    if (errors.length) bad++;
    else console.log(`ok ${f} (${tree.rootNode.descendantCount} nodes)`);
  }
  process.exit(bad ? 1 : 0);
}
main().catch((e) => { console.error(e); process.exit(2); });
