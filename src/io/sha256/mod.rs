//! sha256 of several files at once, two messages in step through the SHA extensions.
//!
//! A `series` manifest records the sha256 of every file it writes; at 512² with noise that hashing
//! was a sixth of the run's CPU. One message keeps the SHA unit half idle: each `sha256rnds2`
//! waits for the previous one (4 cycles' latency on Zen 3/4, issue every 2), so two independent
//! messages interleaved round by round run in almost the time of one (measured 1.8× the bytes per
//! second of the `sha2` crate, which hashes one message at a time). Nothing in the `sha2` crate
//! hashes two messages together, hence the two-lane block function here; everything else (the
//! one-message blocks, the fallback without the extensions) is the crate's, and the tests check
//! every digest against it. Not every SHA unit has the gaps: [`two_lanes_pay`] says where it does.
//! Where it has none but the CPU has AVX-512, a set of eight messages or more goes through the vector
//! units sixteen at a time instead ([`sixteen_lanes`]).

mod blocks;
#[cfg(target_arch = "x86_64")]
use blocks::{compress_one, finish, has_sha_extensions, Lane};
pub use blocks::Message;
use sha2::{Digest, Sha256};
use std::io::{self, Read};

#[cfg(target_arch = "x86_64")]
pub mod sixteen_lanes;

/// The sha256 of each message, in order; an error where a message gives fewer bytes than its length.
pub fn sha256_each(messages: &mut [Message]) -> io::Result<Vec<[u8; 32]>> {
    #[cfg(target_arch = "x86_64")]
    if messages.len() >= sixteen_lanes::min_busy() && sixteen_lanes_pay() {
        // SAFETY: `sixteen_lanes_pay` checked AVX-512F and BW
        return unsafe { sixteen_lanes::sha256_each(messages) };
    }
    #[cfg(target_arch = "x86_64")]
    if has_sha_extensions() {
        // SAFETY: the CPU has the extensions `in_two_lanes` is compiled for (tested just above)
        return unsafe { in_two_lanes(messages) };
    }
    messages.iter_mut().map(one_by_one).collect()
}

/// [`sha256_each`] on up to `threads` threads: the messages dealt out longest first, each to the
/// thread with the fewest bytes so far. For a set too small to keep one thread's lanes busy when
/// other cores are idle (a series' last frame, after every frame is rendered).
pub fn sha256_each_on(messages: &mut [Message], threads: usize) -> io::Result<Vec<[u8; 32]>> {
    let n = messages.len();
    let threads = threads.clamp(1, n.max(1));
    if threads == 1 {
        return sha256_each(messages);
    }
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(messages[i].len));
    let mut shares: Vec<(u64, Vec<usize>)> = vec![(0, Vec::new()); threads];
    for i in order {
        let share = shares.iter_mut().min_by_key(|s| s.0).expect("at least two threads");
        share.0 += messages[i].len;
        share.1.push(i);
    }
    let mut slots: Vec<Option<&mut Message>> = messages.iter_mut().map(Some).collect();
    let mut groups = shares.into_iter().map(|(_, which)| {
        let group: Vec<Message> = which.iter().map(|&i| slots[i].take().map(|m| Message { len: m.len, bytes: &mut *m.bytes }).expect("each message dealt once")).collect();
        (which, group)
    });
    let (first, mut mine) = groups.next().expect("at least two threads");
    let rest: Vec<_> = groups.collect();
    let done = std::thread::scope(|scope| {
        let handles: Vec<_> = rest.into_iter().map(|(which, mut group)| scope.spawn(move || sha256_each(&mut group).map(|d| (which, d)))).collect();
        let mut done = vec![sha256_each(&mut mine).map(|d| (first, d))];
        done.extend(handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err(io::Error::other("a hashing thread panicked")))));
        done
    });
    let mut out = vec![[0u8; 32]; n];
    for share in done {
        let (which, digests) = share?;
        for (i, d) in which.into_iter().zip(digests) {
            out[i] = d;
        }
    }
    Ok(out)
}

/// One message through the `sha2` crate.
fn one_by_one(m: &mut Message) -> io::Result<[u8; 32]> {
    let mut h = Sha256::new();
    let n = io::copy(&mut m.bytes.take(m.len), &mut h)?;
    if n != m.len {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    Ok(h.finalize().into())
}

/// Two messages read chunk by chunk and compressed in step (the blocks one chunk has beyond the
/// other's, at a message's end, one at a time); a message finished ([`finish`]) gives its lane to
/// the next, longest first, so that both lanes stay busy to the end of the set.
///
/// # Safety
/// The CPU must have the SHA extensions, SSE4.1 and SSSE3.
#[cfg(target_arch = "x86_64")]
unsafe fn in_two_lanes(messages: &mut [Message]) -> io::Result<Vec<[u8; 32]>> {
    let mut order: Vec<(usize, &mut Message)> = messages.iter_mut().enumerate().collect();
    order.sort_by_key(|(_, m)| std::cmp::Reverse(m.len));
    let mut queue = order.into_iter().map(|(i, m)| Lane::new(i, m));
    let mut out = vec![[0u8; 32]; queue.len()];
    let (mut a, mut b) = (queue.next(), queue.next());
    while let (Some(x), Some(y)) = (a.as_mut(), b.as_mut()) {
        x.read_chunk()?;
        y.read_chunk()?;
        let n = x.chunk().0.len().min(y.chunk().0.len());
        // SAFETY: the caller checked SHA, SSE4.1 and SSSE3 at run time
        unsafe { two_lanes::compress(&mut x.state, &x.buf[..n * 64].as_chunks::<64>().0, &mut y.state, &y.buf[..n * 64].as_chunks::<64>().0) };
        for lane in [&mut a, &mut b] {
            let l = lane.as_mut().expect("both lanes are busy in the loop");
            compress_one(&mut l.state, &l.buf[..l.filled].as_chunks::<64>().0[n..]);
            if l.unread == 0 {
                let done = lane.take().expect("tested just above");
                out[done.index] = finish(done.state, done.message.len, done.chunk().1);
                *lane = queue.next();
            }
        }
    }
    for lane in a.into_iter().chain(b) {
        // its last chunk compressed whole (or none read yet)
        let (index, state, at) = (lane.index, lane.state, lane.filled);
        out[index] = lane.finish_alone(state, at)?;
    }
    Ok(out)
}

#[cfg(target_arch = "x86_64")]
mod two_lanes {
    //! The block function of the `sha2` crate's SHA-NI backend (its `x86.rs`), with every step done
    //! for two messages: the state in the ABEF/CDGH order `sha256rnds2` wants, four rounds per
    //! message schedule word group.
    use std::arch::x86_64::*;

    /// FIPS 180-4 §4.2.2's round constants, four per 128-bit load.
    use super::blocks::K as K32;

    /// The next four message schedule words from the previous sixteen.
    #[inline(always)]
    unsafe fn schedule(v0: __m128i, v1: __m128i, v2: __m128i, v3: __m128i) -> __m128i {
        let t1 = _mm_sha256msg1_epu32(v0, v1);
        let t2 = _mm_alignr_epi8(v3, v2, 4);
        _mm_sha256msg2_epu32(_mm_add_epi32(t1, t2), v3)
    }

    /// The state as (ABEF, CDGH).
    #[inline(always)]
    unsafe fn load(s: &[u32; 8]) -> (__m128i, __m128i) {
        let p = s.as_ptr() as *const __m128i;
        let cdab = _mm_shuffle_epi32(_mm_loadu_si128(p), 0xB1);
        let efgh = _mm_shuffle_epi32(_mm_loadu_si128(p.add(1)), 0x1B);
        (_mm_alignr_epi8(cdab, efgh, 8), _mm_blend_epi16(efgh, cdab, 0xF0))
    }

    #[inline(always)]
    unsafe fn store(s: &mut [u32; 8], abef: __m128i, cdgh: __m128i) {
        let feba = _mm_shuffle_epi32(abef, 0x1B);
        let dchg = _mm_shuffle_epi32(cdgh, 0xB1);
        let p = s.as_mut_ptr() as *mut __m128i;
        _mm_storeu_si128(p, _mm_blend_epi16(feba, dchg, 0xF0));
        _mm_storeu_si128(p.add(1), _mm_alignr_epi8(dchg, feba, 8));
    }

    /// Compress `a` into `sa` and `b` into `sb`, block by block in step (`a` and `b` equally long).
    #[target_feature(enable = "sha,sse2,ssse3,sse4.1")]
    pub unsafe fn compress(sa: &mut [u32; 8], a: &[[u8; 64]], sb: &mut [u32; 8], b: &[[u8; 64]]) {
        debug_assert_eq!(a.len(), b.len());
        let mask = _mm_set_epi64x(0x0C0D_0E0F_0809_0A0Bu64 as i64, 0x0405_0607_0001_0203u64 as i64);
        let (mut abef0, mut cdgh0) = load(sa);
        let (mut abef1, mut cdgh1) = load(sb);
        for (ba, bb) in a.iter().zip(b) {
            let (save_abef0, save_cdgh0, save_abef1, save_cdgh1) = (abef0, cdgh0, abef1, cdgh1);
            let (pa, pb) = (ba.as_ptr() as *const __m128i, bb.as_ptr() as *const __m128i);
            let word = |p: *const __m128i, i: usize| _mm_shuffle_epi8(_mm_loadu_si128(p.add(i)), mask);
            let (mut a0, mut a1, mut a2, mut a3) = (word(pa, 0), word(pa, 1), word(pa, 2), word(pa, 3));
            let mut a4;
            let (mut b0, mut b1, mut b2, mut b3) = (word(pb, 0), word(pb, 1), word(pb, 2), word(pb, 3));
            let mut b4;
            // four rounds of both messages, `wa`/`wb` their schedule words, `r` the group (0..16)
            macro_rules! rounds4 {
                ($wa:expr, $wb:expr, $r:expr) => {{
                    let k = _mm_loadu_si128(K32.as_ptr().add(4 * $r) as *const __m128i);
                    let (ta, tb) = (_mm_add_epi32($wa, k), _mm_add_epi32($wb, k));
                    cdgh0 = _mm_sha256rnds2_epu32(cdgh0, abef0, ta);
                    cdgh1 = _mm_sha256rnds2_epu32(cdgh1, abef1, tb);
                    abef0 = _mm_sha256rnds2_epu32(abef0, cdgh0, _mm_shuffle_epi32(ta, 0x0E));
                    abef1 = _mm_sha256rnds2_epu32(abef1, cdgh1, _mm_shuffle_epi32(tb, 0x0E));
                }};
            }
            macro_rules! schedule_rounds4 {
                ($a0:ident, $a1:ident, $a2:ident, $a3:ident, $a4:ident, $b0:ident, $b1:ident, $b2:ident, $b3:ident, $b4:ident, $r:expr) => {{
                    $a4 = schedule($a0, $a1, $a2, $a3);
                    $b4 = schedule($b0, $b1, $b2, $b3);
                    rounds4!($a4, $b4, $r);
                }};
            }
            rounds4!(a0, b0, 0);
            rounds4!(a1, b1, 1);
            rounds4!(a2, b2, 2);
            rounds4!(a3, b3, 3);
            schedule_rounds4!(a0, a1, a2, a3, a4, b0, b1, b2, b3, b4, 4);
            schedule_rounds4!(a1, a2, a3, a4, a0, b1, b2, b3, b4, b0, 5);
            schedule_rounds4!(a2, a3, a4, a0, a1, b2, b3, b4, b0, b1, 6);
            schedule_rounds4!(a3, a4, a0, a1, a2, b3, b4, b0, b1, b2, 7);
            schedule_rounds4!(a4, a0, a1, a2, a3, b4, b0, b1, b2, b3, 8);
            schedule_rounds4!(a0, a1, a2, a3, a4, b0, b1, b2, b3, b4, 9);
            schedule_rounds4!(a1, a2, a3, a4, a0, b1, b2, b3, b4, b0, 10);
            schedule_rounds4!(a2, a3, a4, a0, a1, b2, b3, b4, b0, b1, 11);
            schedule_rounds4!(a3, a4, a0, a1, a2, b3, b4, b0, b1, b2, 12);
            schedule_rounds4!(a4, a0, a1, a2, a3, b4, b0, b1, b2, b3, 13);
            schedule_rounds4!(a0, a1, a2, a3, a4, b0, b1, b2, b3, b4, 14);
            schedule_rounds4!(a1, a2, a3, a4, a0, b1, b2, b3, b4, b0, 15);
            abef0 = _mm_add_epi32(abef0, save_abef0);
            cdgh0 = _mm_add_epi32(cdgh0, save_cdgh0);
            abef1 = _mm_add_epi32(abef1, save_abef1);
            cdgh1 = _mm_add_epi32(cdgh1, save_cdgh1);
        }
        store(sa, abef0, cdgh0);
        store(sb, abef1, cdgh1);
    }
}

/// Whether hashing two messages in step beats hashing each as it is written: where the CPU has the
/// SHA extensions and is AMD's (or Hygon's). On Zen 3/4 `sha256rnds2` issues every 2 cycles with 4 of
/// latency, so a second message fills the gaps (`cargo bench --bench digest`: 1.76× the bytes per
/// second of one message, which pays for reading the files back); on Intel's (measured on an Emerald
/// Rapids Xeon: 1.00–1.09×, the unit busy with one message) reading the files back costs more than
/// the lanes save, and a file is better hashed from the bytes just written, still in the cache.
pub fn two_lanes_pay() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        static PAYS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *PAYS.get_or_init(|| amd_or_hygon() && has_sha_extensions())
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// Whether [`sixteen_lanes`] pay: AVX-512F and BW on a CPU that is not AMD's (Zen 4 splits each 512-bit
/// operation in two, and its SHA unit hashes two messages in step at 1.8× one:
/// [`two_lanes_pay`]).
#[cfg(target_arch = "x86_64")]
pub fn sixteen_lanes_pay() -> bool {
    static PAYS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *PAYS.get_or_init(|| std::is_x86_feature_detected!("avx512f") && std::is_x86_feature_detected!("avx512bw") && !amd_or_hygon())
}

/// Whether files read back and hashed together beat files hashed as they are written: two in step
/// through the SHA unit where [`two_lanes_pay`], or sets of [`sixteen_lanes::min_busy`] files or more
/// in AVX-512's lanes where [`sixteen_lanes_pay`] (the caller gathers sets that large).
pub fn hashing_together_pays() -> bool {
    #[cfg(target_arch = "x86_64")]
    return two_lanes_pay() || sixteen_lanes_pay();
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// Whether the CPU is AMD's (or Hygon's: its Dhyana is AMD's Zen 1).
#[cfg(target_arch = "x86_64")]
fn amd_or_hygon() -> bool {
    let v = std::arch::x86_64::__cpuid(0);
    let vendor: Vec<u8> = [v.ebx, v.edx, v.ecx].iter().flat_map(|r| r.to_le_bytes()).collect();
    vendor == b"AuthenticAMD" || vendor == b"HygonGenuine"
}

#[cfg(test)]
mod tests {
    use super::blocks::CHUNK;
    use super::*;

    fn digests(msgs: &[&[u8]]) -> Vec<[u8; 32]> {
        let mut readers: Vec<&[u8]> = msgs.to_vec();
        let mut m: Vec<Message> = readers.iter_mut().map(|r| Message { len: r.len() as u64, bytes: r }).collect();
        sha256_each(&mut m).unwrap()
    }

    fn bytes(n: usize, seed: u64) -> Vec<u8> {
        let mut x = seed;
        (0..n)
            .map(|_| {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                (x >> 33) as u8
            })
            .collect()
    }

    /// Every digest is the `sha2` crate's, for lengths around the padding's edges (55, 56, 63, 64
    /// bytes past a block), empty messages, one message, and sets where lanes change hands often.
    #[test]
    fn digests_are_sha2s() {
        let lens = [0usize, 1, 3, 55, 56, 57, 63, 64, 65, 119, 120, 127, 128, 129, 1000, 4096, 65_536 + 55, 262_144 + 512];
        let data = bytes(300_000, 7);
        let sets: Vec<Vec<usize>> = vec![vec![], vec![5], lens.to_vec(), lens.iter().rev().copied().collect(), vec![262_656, 262_656, 1_000, 131_072 + 17], vec![64; 9], vec![0; 3]];
        for set in sets {
            let msgs: Vec<&[u8]> = set.iter().enumerate().map(|(i, &n)| &data[i * 7..i * 7 + n]).collect();
            let got = digests(&msgs);
            for (m, g) in msgs.iter().zip(&got) {
                assert_eq!(*g, <[u8; 32]>::from(Sha256::digest(m)), "length {}", m.len());
            }
        }
    }

    /// A message that ends before its stated length is an error, in either path; the one-by-one path
    /// (CPUs without the SHA extensions) gives the same digests.
    #[test]
    fn short_messages_fail_and_both_paths_agree() {
        let data = bytes(70_000, 3);
        for n in [0usize, 64, 65_536, 69_999] {
            let mut r: &[u8] = &data[..n];
            assert!(sha256_each(&mut [Message { len: n as u64 + 1, bytes: &mut r }]).is_err(), "{n}");
            let mut r: &[u8] = &data[..n];
            assert!(one_by_one(&mut Message { len: n as u64 + 1, bytes: &mut r }).is_err(), "{n}");
            let mut r: &[u8] = &data[..n];
            assert_eq!(one_by_one(&mut Message { len: n as u64, bytes: &mut r }).unwrap(), digests(&[&data[..n]])[0]);
        }
    }

    /// Sixteen lanes give the `sha2` crate's digests: sets of eight to forty messages (lanes refilled
    /// often, empty messages, lengths at the padding's and the chunks' edges, a set ending with fewer
    /// busy lanes than [`sixteen_lanes::min_busy`]); a message shorter than its length is an error.
    #[test]
    fn sixteen_lanes_give_sha2s() {
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("avx512f") && std::is_x86_feature_detected!("avx512bw") {
            let data = bytes(700_000, 11);
            let edges = [0usize, 1, 55, 56, 63, 64, 65, 119, 128, 1000, CHUNK - 1, CHUNK, CHUNK + 1, CHUNK + 64, 3 * CHUNK + 56, 262_656, 524_288 + 15];
            let mut sets: Vec<Vec<usize>> = vec![edges.to_vec(), vec![64; 8], vec![0; 9], vec![100_000; 16], vec![5; 40]];
            sets.push((0..40).map(|i| edges[(i * 7) % edges.len()]).collect());
            sets.push([vec![600_000], vec![1_000; 15]].concat());
            for set in sets {
                let msgs: Vec<&[u8]> = set.iter().enumerate().map(|(i, &n)| &data[i * 3..i * 3 + n]).collect();
                let mut readers: Vec<&[u8]> = msgs.clone();
                let mut m: Vec<Message> = readers.iter_mut().map(|r| Message { len: r.len() as u64, bytes: r }).collect();
                // SAFETY: AVX-512F and BW checked above
                let got = unsafe { sixteen_lanes::sha256_each(&mut m) }.unwrap();
                for (m, g) in msgs.iter().zip(&got) {
                    assert_eq!(*g, <[u8; 32]>::from(Sha256::digest(m)), "length {}", m.len());
                }
            }
            let mut readers: Vec<&[u8]> = vec![&data[..1000]; 9];
            let mut m: Vec<Message> = readers.iter_mut().map(|r| Message { len: 1000, bytes: r }).collect();
            m[4].len = 1001;
            // SAFETY: AVX-512F and BW checked above
            assert!(unsafe { sixteen_lanes::sha256_each(&mut m) }.is_err());
            return;
        }
        eprintln!("SKIPPED sixteen_lanes_give_sha2s: this CPU has no AVX-512F and BW");
    }

    /// Messages dealt to several threads give the digests of one thread, in order; a short message
    /// is an error there too.
    #[test]
    fn threads_give_the_same_digests() {
        let data = bytes(300_000, 5);
        let lens = [262_656usize, 524_800, 1_048_576 / 4, 0, 65, 200_000, 3];
        for threads in [1, 2, 3, 8] {
            let mut readers: Vec<&[u8]> = lens.iter().enumerate().map(|(i, &n)| &data[i..i + n.min(299_000)]).collect();
            let want: Vec<[u8; 32]> = readers.iter().map(|r| Sha256::digest(r).into()).collect();
            let mut m: Vec<Message> = readers.iter_mut().map(|r| Message { len: r.len() as u64, bytes: r }).collect();
            assert_eq!(sha256_each_on(&mut m, threads).unwrap(), want, "{threads} threads");
        }
        let mut readers: Vec<&[u8]> = vec![&data[..100]; 4];
        let mut m: Vec<Message> = readers.iter_mut().map(|r| Message { len: 100, bytes: r }).collect();
        m[3].len = 101;
        assert!(sha256_each_on(&mut m, 2).is_err());
    }

    /// FIPS 180-4's example "abc" (Appendix B.1), so the test does not rest on the crate alone.
    #[test]
    fn fips_example() {
        let d = digests(&[b"abc", b"abc"]);
        let hex: String = d[0].iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        assert_eq!(d[0], d[1]);
    }
}
