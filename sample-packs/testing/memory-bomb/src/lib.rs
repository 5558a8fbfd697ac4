//! Attack: memory exhaustion. `invoke` allocates 1 MiB chunks without bound
//! and writes every byte of each (so the pages are really committed) until
//! the runtime's memory limit stops it (allocation failure traps).

use std::hint::black_box;

use wop_sdk::{Ctx, NodeError, Outcome, Pack, PackInfo, Request};

/// The pack.
struct MemoryBomb;

/// Size of one chunk.
const CHUNK: usize = 1 << 20;

impl Pack for MemoryBomb {
    fn describe() -> PackInfo {
        PackInfo::new("memory-bomb", "0.1.0").node("wop.testing.memory-bomb", "0.1.0")
    }

    fn invoke(_ctx: &Ctx, _request: Request) -> Result<Outcome, NodeError> {
        let mut chunks: Vec<Vec<u8>> = Vec::new();
        let mut fill: u8 = 1;
        loop {
            let mut chunk = Vec::with_capacity(CHUNK);
            chunk.resize(CHUNK, fill);
            fill = fill.wrapping_add(1) | 1;
            chunks.push(black_box(chunk));
            black_box(&mut chunks);
        }
    }
}

wop_sdk::export_pack!(MemoryBomb);
