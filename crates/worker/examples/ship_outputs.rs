//! What it costs to send a task folder's expected outputs to a worker,
//! through an OS pipe as the supervisor does: inline in the JSON line as
//! base64 (the older form) against raw bytes after the line.
//!
//! `cargo run --release -p kevo-worker --example ship_outputs -- [MB] [REPEATS]`
//! (default 535 MB per output, two outputs: KernelBench Level 1 problem 83
//! at full size, timed seed and verification seed; 3 repeats).

use std::io::BufReader;
use std::time::Instant;

use kevo_worker::{Blob, ExpectedEntry, Request, TaskPackage};

fn package(expected: Vec<ExpectedEntry>) -> Request {
    Request::Define {
        package: Box::new(TaskPackage {
            name: "kb".into(),
            hash: "h".into(),
            root: "/kb".into(),
            files: None,
            expected,
        }),
    }
}

fn entry(outputs: Vec<Blob>, attached: Vec<u64>) -> ExpectedEntry {
    ExpectedEntry {
        size: "full".into(),
        fingerprint: "f".into(),
        outputs,
        attached,
    }
}

/// Send `request` and `raw` through a pipe; the reader parses it as the
/// worker does. Returns seconds from the first byte written to the request
/// in the reader's hands, and the bytes the reader got.
fn ship(request: Request, raw: &[&[u8]]) -> (f64, usize) {
    let (reader, mut writer) = std::io::pipe().expect("a pipe");
    let started = Instant::now();
    let worker = std::thread::spawn(move || {
        let mut input = BufReader::with_capacity(1 << 16, reader);
        let request = Request::read_from(&mut input)
            .expect("read")
            .expect("a request")
            .expect("parsed");
        match request {
            Request::Define { package } => package
                .expected
                .iter()
                .flat_map(|e| e.outputs.iter().map(|b| b.0.len()))
                .sum::<usize>(),
            _ => unreachable!(),
        }
    });
    request.write_to(raw, &mut writer).expect("write");
    drop(writer);
    let got = worker.join().expect("reader");
    (started.elapsed().as_secs_f64(), got)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mb: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(535);
    let repeats: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(3);
    let outputs: Vec<Vec<u8>> = (0..2u8)
        .map(|k| {
            (0..mb << 20)
                .map(|i| (i as u8).wrapping_mul(31) ^ k)
                .collect()
        })
        .collect();
    let total = outputs.iter().map(Vec::len).sum::<usize>();
    println!("{} outputs of {mb} MB", outputs.len());
    let mut inline = Vec::new();
    let mut raw = Vec::new();
    for _ in 0..repeats {
        // Inline: the coordinator's copy into Blobs is part of the old path.
        let started = Instant::now();
        let entries = outputs
            .iter()
            .map(|o| entry(vec![Blob(o.clone())], Vec::new()))
            .collect();
        let (_, got) = ship(package(entries), &[]);
        assert_eq!(got, total);
        inline.push(started.elapsed().as_secs_f64());

        let started = Instant::now();
        let entries = outputs
            .iter()
            .map(|o| entry(Vec::new(), vec![o.len() as u64]))
            .collect();
        let slices: Vec<&[u8]> = outputs.iter().map(Vec::as_slice).collect();
        let (_, got) = ship(package(entries), &slices);
        assert_eq!(got, total);
        raw.push(started.elapsed().as_secs_f64());
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        (v[v.len() / 2], v[0], v[v.len() - 1])
    };
    let (im, imin, imax) = median(&mut inline);
    let (rm, rmin, rmax) = median(&mut raw);
    println!("inline base64: median {im:.2} s (min {imin:.2}, max {imax:.2})");
    println!("raw bytes:     median {rm:.2} s (min {rmin:.2}, max {rmax:.2})");
    println!("ratio inline / raw: {:.1}x", im / rm);
}
