//! Tests and examples run from the build tree: carry libdistc's directory
//! (found by distc-sys, DEP_DISTC_LIB_DIR) as an RPATH.
fn main() {
    if let Ok(dir) = std::env::var("DEP_DISTC_LIB_DIR") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
    }
}
