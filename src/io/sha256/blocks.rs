//! What every way of hashing here shares: the messages, read a chunk at a time into lanes, and the
//! block function's ends (the initial value, the padding of the last block).

use std::io::{self, Read};

/// The initial hash value (FIPS 180-4 §5.3.3).
pub(super) const H0: [u32; 8] = [0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19];

/// FIPS 180-4 §4.2.2's round constants.
pub(super) const K: [u32; 64] = [
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
    0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
    0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
];

/// Bytes read from a message at a time: a multiple of the block, small enough that sixteen lanes'
/// chunks stay in L2 (1 MiB), large enough that a read costs little beside its hashing.
pub(super) const CHUNK: usize = 1 << 16;

/// A message to hash: its length and where its bytes come from (exactly `len` of them).
pub struct Message<'r> {
    pub len: u64,
    pub bytes: &'r mut (dyn Read + Send),
}

/// A message being hashed: its index, chaining state, the bytes not yet read, and the chunk read
/// last (its whole blocks are compressed at once; a shorter tail only ever at the message's end).
#[cfg(target_arch = "x86_64")]
pub(super) struct Lane<'m, 'r> {
    pub(super) index: usize,
    pub(super) state: [u32; 8],
    pub(super) message: &'m mut Message<'r>,
    pub(super) unread: u64,
    pub(super) buf: Vec<u8>,
    pub(super) filled: usize,
}

#[cfg(target_arch = "x86_64")]
impl<'m, 'r> Lane<'m, 'r> {
    pub(super) fn new(index: usize, message: &'m mut Message<'r>) -> Self {
        let unread = message.len;
        Lane { index, state: H0, message, unread, buf: vec![0; CHUNK], filled: 0 }
    }

    /// Read the next chunk (empty once the message is read), in one `read_exact`.
    pub(super) fn read_chunk(&mut self) -> io::Result<()> {
        let n = self.unread.min(CHUNK as u64) as usize;
        self.message.bytes.read_exact(&mut self.buf[..n])?;
        (self.filled, self.unread) = (n, self.unread - n as u64);
        Ok(())
    }

    /// The digest of the message from `state`, the blocks before byte `at` of the last chunk
    /// compressed: the rest of it through [`compress_one`], one chunk at a time.
    pub(super) fn finish_alone(mut self, mut state: [u32; 8], at: usize) -> io::Result<[u8; 32]> {
        compress_one(&mut state, self.buf[at..self.filled].as_chunks::<64>().0);
        while self.unread > 0 {
            self.read_chunk()?;
            compress_one(&mut state, self.chunk().0);
        }
        Ok(finish(state, self.message.len, self.chunk().1))
    }

    /// The last chunk's whole blocks and the bytes after them.
    pub(super) fn chunk(&self) -> (&[[u8; 64]], &[u8]) {
        self.buf[..self.filled].as_chunks::<64>()
    }
}

/// The digest from the state after every whole block, the message's length and its last bytes
/// (fewer than a block): those padded as FIPS 180-4 §5.1.1 asks (0x80, zeros, the length in bits
/// as a big-endian u64) and compressed.
#[cfg(target_arch = "x86_64")]
pub(super) fn finish(mut state: [u32; 8], len: u64, rest: &[u8]) -> [u8; 32] {
    let mut tail = [0u8; 128];
    tail[..rest.len()].copy_from_slice(rest);
    tail[rest.len()] = 0x80;
    let end = if rest.len() < 56 { 64 } else { 128 };
    tail[end - 8..end].copy_from_slice(&(len * 8).to_be_bytes());
    compress_one(&mut state, tail[..end].as_chunks::<64>().0);
    let mut digest = [0u8; 32];
    for (d, s) in digest.chunks_exact_mut(4).zip(state) {
        d.copy_from_slice(&s.to_be_bytes());
    }
    digest
}

/// One message's blocks through the `sha2` crate's block function.
#[cfg(target_arch = "x86_64")]
pub(super) fn compress_one(state: &mut [u32; 8], blocks: &[[u8; 64]]) {
    use sha2::digest::{consts::U64, generic_array::GenericArray};
    const _: () = assert!(size_of::<GenericArray<u8, U64>>() == 64 && align_of::<GenericArray<u8, U64>>() == 1);
    // SAFETY: GenericArray<u8, U64> is a transparent wrapper of 64 bytes with alignment 1 (checked
    // above), so a slice of [u8; 64] is a slice of as many of them
    let blocks = unsafe { std::slice::from_raw_parts(blocks.as_ptr() as *const GenericArray<u8, U64>, blocks.len()) };
    sha2::compress256(state, blocks);
}

/// The SHA extensions and what `two_lanes` is compiled with besides (SSE4.1, SSSE3).
#[cfg(target_arch = "x86_64")]
pub(super) fn has_sha_extensions() -> bool {
    std::is_x86_feature_detected!("sha") && std::is_x86_feature_detected!("sse4.1") && std::is_x86_feature_detected!("ssse3")
}
