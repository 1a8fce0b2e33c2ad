//! What every way of hashing here shares: the messages, read a chunk at a time into lanes, and the
//! block function's ends (the initial value, the padding of the last block).

use std::io::{self, Read};

/// The initial hash value (FIPS 180-4 §5.3.3).
pub(super) const H0: [u32; 8] = [0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19];

/// Bytes read from a message at a time: a multiple of the block, small enough to stay in L2 for
/// two lanes, large enough that a read costs little beside its hashing.
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
