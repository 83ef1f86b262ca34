//! Finds libdistc: $DISTC_LIB_DIR, else `pkg-config distc` (the command),
//! else the CMake build tree next to this checkout ($DISTC_BUILD or
//! <repo>/build). Dependents get the directory as DEP_DISTC_LIB_DIR, so their
//! tests and examples can carry it as an RPATH.
use std::env;
use std::path::PathBuf;
use std::process::Command;

fn from_pkg_config() -> Option<String> {
    let out = Command::new("pkg-config").args(["--variable=libdir", "distc"]).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let dir = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!dir.is_empty()).then_some(dir)
}

fn main() {
    println!("cargo:rerun-if-env-changed=DISTC_LIB_DIR");
    println!("cargo:rerun-if-env-changed=DISTC_BUILD");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let build_tree = env::var("DISTC_BUILD")
        .map(PathBuf::from)
        .unwrap_or_else(|_| manifest.join("../../../build"));
    let dir = env::var("DISTC_LIB_DIR")
        .ok()
        .or_else(from_pkg_config)
        .or_else(|| build_tree.join("libdistc.so").exists().then(|| build_tree.display().to_string()))
        .unwrap_or_else(|| {
            panic!(
                "distc-sys: libdistc not found: set DISTC_LIB_DIR, install it where pkg-config finds distc.pc, \
                 or build it in {} (cmake --preset default && cmake --build build)",
                build_tree.display()
            )
        });
    println!("cargo:rustc-link-search=native={dir}");
    println!("cargo:rustc-link-lib=dylib=distc");
    println!("cargo:lib_dir={dir}");
}
