// `sqlx::migrate!` embeds the migration folders when the crate compiles;
// without this, a new migration file (no Rust file changed) was left out
// of the build until something else made the crate recompile.
fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
