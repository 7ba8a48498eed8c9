// rel_rust.rs - a Rust program under the shim (test_matrix 'rust'; built there when rustc is found)
//
// Rust's runtime asks pthread_getattr_np() about the main thread and about
// every thread it spawns before anything else, and glibc allocates inside
// it under the thread's own lock: the shim once deadlocked there.  Four
// threads and the main thread churn a HashMap of Strings and each leaks one
// boxed array at leak_here.  Output: 'threads 4', 'leak_here 5' and a
// checksum of the maps' sizes (the same with and without the shim).

use std::collections::HashMap;
use std::thread;

#[inline(never)]
fn leak_here(n: u8) -> &'static mut [u8; 100] {
    Box::leak(Box::new([n; 100]))
}

fn churn(seed: u64) -> usize {
    let mut m: HashMap<String, Vec<u64>> = HashMap::new();
    for i in 0..20000u64 {
        m.entry(format!("k{}", (i * 7 + seed) % 500)).or_default().push(i);
        if i % 3 == 0 {
            m.remove(&format!("k{}", (i + 11) % 500));
        }
    }
    m.len()
}

fn main() {
    let workers: Vec<_> = (0..4u64)
        .map(|t| {
            thread::spawn(move || {
                let n = churn(t);
                leak_here(t as u8)[0] as usize + n
            })
        })
        .collect();
    let mut sum = churn(9) + leak_here(9)[0] as usize;
    for w in workers {
        sum += w.join().unwrap();
    }
    println!("threads 4");
    println!("leak_here 5");
    println!("checksum {}", sum);
}
