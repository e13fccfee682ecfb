//! A standalone worker binary (the `kevo worker` subcommand does the same);
//! tests of this crate supervise it directly.

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Err(e) = kevo_worker::worker_main(&args) {
        eprintln!("kevo worker: {e}");
        std::process::exit(2);
    }
}
