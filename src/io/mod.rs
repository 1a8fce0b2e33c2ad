//! File formats: one module per format. STUB.
pub mod atomic;
pub mod float;
pub mod pgm;
pub mod png;
pub mod smv;
pub mod text;

/// Little-endian bytes of a slice of plain numbers, without copying on little-endian machines (every
/// format nanoBragg writes is little-endian on x86). Converting element by element into a byte buffer
/// costs more than the write itself at 4096².
pub trait LeBytes: Copy {
    const SIZE: usize;
    fn put_le(self, out: &mut Vec<u8>);
}

impl LeBytes for f32 {
    const SIZE: usize = 4;
    fn put_le(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
}

impl LeBytes for u16 {
    const SIZE: usize = 2;
    fn put_le(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
}

/// Write `data` as little-endian bytes.
pub fn write_le<T: LeBytes>(w: &mut impl std::io::Write, data: &[T]) -> std::io::Result<()> {
    if cfg!(target_endian = "little") {
        // SAFETY: f32 and u16 have no padding and every bit pattern is a valid u8 sequence; the
        // byte slice covers exactly the same memory as `data`.
        let bytes = unsafe { std::slice::from_raw_parts(data.as_ptr() as *const u8, std::mem::size_of_val(data)) };
        w.write_all(bytes)
    } else {
        let mut buf = Vec::with_capacity(1 << 17);
        for chunk in data.chunks((1 << 17) / T::SIZE) {
            buf.clear();
            for v in chunk {
                v.put_le(&mut buf);
            }
            w.write_all(&buf)?;
        }
        Ok(())
    }
}
