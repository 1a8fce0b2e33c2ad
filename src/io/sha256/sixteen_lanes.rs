//! sha256 of many messages at once, sixteen side by side in the 32-bit lanes of AVX-512 registers.
//!
//! Where one message keeps the SHA unit busy (Intel's: on an Emerald Rapids Xeon two messages in
//! step through `sha256rnds2` ran 1.00–1.09× one), the integer vector units still have room: every
//! round of FIPS 180-4 §6.2.2 is a handful of rotations (`vprord`), three-input logic (`vpternlogd`:
//! Σ, Ch, Maj) and additions, the same for every lane, so sixteen independent messages take barely
//! longer than one takes through the vector units (measured on that Xeon: 2.9 GB/s over sixteen
//! lanes against 1.4 GB/s through the SHA extensions). A `series` gives its files to
//! `sha256_each` several frames at a time; they are sorted longest first and a lane whose
//! message ends takes the next at once, so the lanes stay full to near the end; once fewer than
//! [`min_busy`] are busy, the rest finish one at a time (the `sha2` crate's block function, through
//! the SHA extensions where the CPU has them).

use super::blocks::{finish, Lane, Message, CHUNK, H0, K};
use std::arch::x86_64::*;
use std::io;

/// Messages hashed in step.
const LANES: usize = 16;

/// Busy lanes below which a step of all sixteen costs more than hashing the busy ones alone: with
/// the SHA extensions (a step of sixteen blocks took as long as ~7.7 blocks through them), and
/// without (the `sha2` crate's portable rounds: about one block a step's time).
pub fn min_busy() -> usize {
    if super::blocks::has_sha_extensions() {
        8
    } else {
        2
    }
}

/// A lane's message and how far into its last chunk the blocks are compressed.
struct Busy<'m, 'r> {
    lane: Lane<'m, 'r>,
    at: usize,
}

impl Busy<'_, '_> {
    /// Whole blocks of the last chunk not yet compressed.
    fn blocks_left(&self) -> usize {
        (self.lane.filled - self.at) / 64
    }
}

/// The sha256 of each message, in order (see the module's text).
///
/// # Safety
/// The CPU must have AVX-512F and AVX-512BW.
#[target_feature(enable = "avx512f,avx512bw")]
pub unsafe fn sha256_each(messages: &mut [Message]) -> io::Result<Vec<[u8; 32]>> {
    let mut order: Vec<(usize, &mut Message)> = messages.iter_mut().enumerate().collect();
    order.sort_by_key(|(_, m)| std::cmp::Reverse(m.len));
    let mut queue = order.into_iter().map(|(i, m)| Lane::new(i, m));
    let mut out = vec![[0u8; 32]; queue.len()];
    let mut lanes: [Option<Busy>; LANES] = Default::default();
    let mut state = [[0u32; LANES]; 8];
    // what an idle lane hashes (its state is thrown away)
    let idle = vec![0u8; CHUNK];
    loop {
        for (l, slot) in lanes.iter_mut().enumerate() {
            make_ready(slot, &mut queue, &mut state, l, &mut out)?;
        }
        let busy = lanes.iter().flatten().count();
        if busy < min_busy() {
            break;
        }
        let steps = lanes.iter().flatten().map(Busy::blocks_left).min().unwrap_or(0);
        let from: [*const u8; LANES] = std::array::from_fn(|l| lanes[l].as_ref().map_or(idle.as_ptr(), |b| b.lane.buf[b.at..].as_ptr()));
        // SAFETY: AVX-512F and BW (this function's); every busy lane has `steps` whole blocks from its
        // pointer, the idle buffer CHUNK / 64 >= steps
        unsafe { compress(&mut state, &from, steps) };
        for b in lanes.iter_mut().flatten() {
            b.at += 64 * steps;
        }
    }
    for (l, slot) in lanes.iter_mut().enumerate() {
        if let Some(Busy { lane, at }) = slot.take() {
            let index = lane.index;
            out[index] = lane.finish_alone(std::array::from_fn(|i| state[i][l]), at)?;
        }
    }
    Ok(out)
}

/// Leave lane `l` busy with a block to compress, or empty when every message is taken: its chunk
/// read on, its message finished (the digest into `out`), the next message taken from `queue`.
fn make_ready<'m, 'r>(
    slot: &mut Option<Busy<'m, 'r>>,
    queue: &mut impl Iterator<Item = Lane<'m, 'r>>,
    state: &mut [[u32; LANES]; 8],
    l: usize,
    out: &mut [[u8; 32]],
) -> io::Result<()> {
    loop {
        match slot {
            Some(b) if b.blocks_left() > 0 => return Ok(()),
            Some(b) if b.lane.unread > 0 => {
                b.lane.read_chunk()?;
                b.at = 0;
            }
            Some(b) => {
                let s: [u32; 8] = std::array::from_fn(|i| state[i][l]);
                out[b.lane.index] = finish(s, b.lane.message.len, &b.lane.buf[b.at..b.lane.filled]);
                *slot = None;
            }
            None => match queue.next() {
                Some(lane) => {
                    for (w, h) in state.iter_mut().zip(H0) {
                        w[l] = h;
                    }
                    *slot = Some(Busy { lane, at: 0 });
                }
                None => return Ok(()),
            },
        }
    }
}

/// `steps` blocks of each lane's message (64 bytes apart from `from[l]`) into its state (`state[i][l]`
/// is word i of lane l).
///
/// # Safety
/// AVX-512F and BW (`vpshufb` on 512 bits); `steps * 64` bytes readable from every pointer.
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn compress(state: &mut [[u32; LANES]; 8], from: &[*const u8; LANES], steps: usize) {
    let big_endian = _mm512_broadcast_i32x4(_mm_setr_epi8(3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12));
    let word = |i: usize, s: &[[u32; LANES]; 8]| _mm512_loadu_si512(s[i].as_ptr() as *const _);
    for step in 0..steps {
        // SAFETY: the caller's bound (each pointer readable for `steps` blocks)
        let mut w = unsafe { transpose(from, 64 * step) };
        for x in w.iter_mut() {
            *x = _mm512_shuffle_epi8(*x, big_endian);
        }
        let [mut a, mut b, mut c, mut d, mut e, mut f, mut g, mut h]: [__m512i; 8] = std::array::from_fn(|i| word(i, state));
        macro_rules! round {
            ($a:ident, $b:ident, $c:ident, $d:ident, $e:ident, $f:ident, $g:ident, $h:ident, $t:expr) => {{
                let t: usize = $t;
                if t >= 16 {
                    // W_t = σ1(W_t−2) + W_t−7 + σ0(W_t−15) + W_t−16, in place of W_t−16
                    let (w15, w2) = (w[(t - 15) & 15], w[(t - 2) & 15]);
                    let s0 = xor3(_mm512_ror_epi32::<7>(w15), _mm512_ror_epi32::<18>(w15), _mm512_srli_epi32::<3>(w15));
                    let s1 = xor3(_mm512_ror_epi32::<17>(w2), _mm512_ror_epi32::<19>(w2), _mm512_srli_epi32::<10>(w2));
                    w[t & 15] = _mm512_add_epi32(_mm512_add_epi32(w[t & 15], s0), _mm512_add_epi32(w[(t - 7) & 15], s1));
                }
                let wk = _mm512_add_epi32(w[t & 15], _mm512_set1_epi32(K[t] as i32));
                let sigma1 = xor3(_mm512_ror_epi32::<6>($e), _mm512_ror_epi32::<11>($e), _mm512_ror_epi32::<25>($e));
                let ch = _mm512_ternarylogic_epi32::<0xCA>($e, $f, $g); // e ? f : g
                let t1 = _mm512_add_epi32(_mm512_add_epi32($h, sigma1), _mm512_add_epi32(ch, wk));
                let sigma0 = xor3(_mm512_ror_epi32::<2>($a), _mm512_ror_epi32::<13>($a), _mm512_ror_epi32::<22>($a));
                let maj = _mm512_ternarylogic_epi32::<0xE8>($a, $b, $c); // majority
                $d = _mm512_add_epi32($d, t1);
                $h = _mm512_add_epi32(t1, _mm512_add_epi32(sigma0, maj));
            }};
        }
        // eight rounds, the working variables' roles turning by one each round (written out, so
        // that every W index is a constant and the schedule stays in registers)
        macro_rules! rounds8 {
            ($t:expr) => {
                round!(a, b, c, d, e, f, g, h, $t);
                round!(h, a, b, c, d, e, f, g, $t + 1);
                round!(g, h, a, b, c, d, e, f, $t + 2);
                round!(f, g, h, a, b, c, d, e, $t + 3);
                round!(e, f, g, h, a, b, c, d, $t + 4);
                round!(d, e, f, g, h, a, b, c, $t + 5);
                round!(c, d, e, f, g, h, a, b, $t + 6);
                round!(b, c, d, e, f, g, h, a, $t + 7);
            };
        }
        rounds8!(0);
        rounds8!(8);
        rounds8!(16);
        rounds8!(24);
        rounds8!(32);
        rounds8!(40);
        rounds8!(48);
        rounds8!(56);
        for (i, v) in [a, b, c, d, e, f, g, h].into_iter().enumerate() {
            _mm512_storeu_si512(state[i].as_mut_ptr() as *mut _, _mm512_add_epi32(v, word(i, state)));
        }
    }
}

#[inline]
#[target_feature(enable = "avx512f")]
fn xor3(a: __m512i, b: __m512i, c: __m512i) -> __m512i {
    _mm512_ternarylogic_epi32::<0x96>(a, b, c)
}

/// The block at `offset` of each lane as sixteen vectors, vector t holding word t of every lane
/// (a 16×16 transpose of 32-bit words in four shuffle stages).
///
/// # Safety
/// AVX-512F; 64 bytes readable at `from[l] + offset` for every lane.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn transpose(from: &[*const u8; LANES], offset: usize) -> [__m512i; 16] {
    // SAFETY: the caller's bound
    let r: [__m512i; 16] = std::array::from_fn(|l| unsafe { _mm512_loadu_si512(from[l].add(offset) as *const _) });
    // in each 128-bit block q: rows 2i, 2i+1 interleaved (words 4q, 4q+1 | 4q+2, 4q+3)
    let t: [__m512i; 16] = std::array::from_fn(|k| if k % 2 == 0 { _mm512_unpacklo_epi32(r[k], r[k + 1]) } else { _mm512_unpackhi_epi32(r[k - 1], r[k]) });
    // u[4i + m]: in block q, word 4q + [0, 2, 1, 3][m] of rows 4i..4i+4
    let u: [__m512i; 16] = std::array::from_fn(|k| {
        let (g, m) = (k / 4 * 4, k % 4);
        let (x, y) = (t[g + m % 2], t[g + 2 + m % 2]);
        if m < 2 {
            _mm512_unpacklo_epi64(x, y)
        } else {
            _mm512_unpackhi_epi64(x, y)
        }
    });
    // v[8i + k]: blocks (q0 | q2 for k < 4, q1 | q3 otherwise) of rows 8i..8i+4 then 8i+4..8i+8
    let v: [__m512i; 16] = std::array::from_fn(|k| {
        let (i, m) = (k / 8, k % 4);
        let (x, y) = (u[8 * i + m], u[8 * i + 4 + m]);
        if k % 8 < 4 {
            _mm512_shuffle_i32x4::<0x88>(x, y)
        } else {
            _mm512_shuffle_i32x4::<0xDD>(x, y)
        }
    });
    // o[k]: one word of all sixteen rows, word 4 * (k / 4) + [0, 2, 1, 3][k % 4]
    let o: [__m512i; 16] = std::array::from_fn(|k| {
        let (x, y) = (v[k % 8], v[8 + k % 8]);
        if k < 8 {
            _mm512_shuffle_i32x4::<0x88>(x, y)
        } else {
            _mm512_shuffle_i32x4::<0xDD>(x, y)
        }
    });
    std::array::from_fn(|t| o[4 * (t / 4) + [0, 2, 1, 3][t % 4]])
}
