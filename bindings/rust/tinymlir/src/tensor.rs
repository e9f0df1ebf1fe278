//! Element types and tensor views: borrowed slices with a shape, handed to the C API as
//! `tm_tensor` for the duration of one call (the library never keeps the pointers).

use std::ffi::c_void;
use std::marker::PhantomData;

use tinymlir_sys as sys;

use crate::error::{Error, ErrorKind, Result};

/// Largest rank the C API accepts.
pub const MAX_RANK: usize = sys::TM_MAX_RANK as usize;

/// Element type of a tensor or traced value.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    /// IEEE binary32 (Rust's `f32`).
    F32,
    /// IEEE binary64 (Rust's `f64`).
    F64,
    /// 32-bit signed integers (Rust's `i32`).
    I32,
    /// 64-bit signed integers (Rust's `i64`).
    I64,
    /// One byte per element, 0 or 1 (Rust's `bool`).
    Bool,
    /// IEEE binary16 ([`F16`]): a storage type (inputs, outputs, data movement, casts, and
    /// matmuls with an f32 operand; arithmetic on it is refused).
    F16,
    /// bfloat16 ([`Bf16`]): a storage type, as `F16`.
    BF16,
    /// 8-bit weights in blocks of 32 along the last axis (llama.cpp's Q8_0: a binary16
    /// scale and 32 `i8` per 34-byte block); for [`crate::ModelOptions::weights`]. It has
    /// no Rust element type: [`DType::size`] is 0.
    Q8_0,
}

impl DType {
    pub(crate) fn raw(self) -> sys::tm_dtype {
        match self {
            DType::F32 => sys::TM_F32,
            DType::F64 => sys::TM_F64,
            DType::I32 => sys::TM_I32,
            DType::I64 => sys::TM_I64,
            DType::Bool => sys::TM_BOOL,
            DType::F16 => sys::TM_F16,
            DType::BF16 => sys::TM_BF16,
            DType::Q8_0 => sys::TM_Q8_0,
        }
    }

    pub(crate) fn from_raw(raw: sys::tm_dtype) -> Result<DType> {
        Ok(match raw {
            sys::TM_F32 => DType::F32,
            sys::TM_F64 => DType::F64,
            sys::TM_I32 => DType::I32,
            sys::TM_I64 => DType::I64,
            sys::TM_BOOL => DType::Bool,
            sys::TM_F16 => DType::F16,
            sys::TM_BF16 => DType::BF16,
            sys::TM_Q8_0 => DType::Q8_0,
            other => {
                return Err(Error::new(ErrorKind::DType, format!("unknown dtype {other} from the library")))
            }
        })
    }

    /// Bytes per element (0 for `Q8_0`, stored 34 bytes per block of 32 elements).
    pub fn size(self) -> usize {
        match self {
            DType::F32 | DType::I32 => 4,
            DType::F64 | DType::I64 => 8,
            DType::Bool => 1,
            DType::F16 | DType::BF16 => 2,
            DType::Q8_0 => 0,
        }
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
    impl Sealed for i32 {}
    impl Sealed for i64 {}
    impl Sealed for bool {}
    impl Sealed for super::F16 {}
    impl Sealed for super::Bf16 {}
}

/// An IEEE binary16 value, as its bits (Rust has no stable `f16`).
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct F16(pub u16);

/// A bfloat16 value, as its bits: the top half of an `f32`.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Bf16(pub u16);

impl F16 {
    /// The exact `f32` value.
    pub fn to_f32(self) -> f32 {
        let h = u32::from(self.0);
        let sign = (h & 0x8000) << 16;
        let magnitude = h & 0x7fff;
        if magnitude >= 0x7c00 {
            return f32::from_bits(sign | 0x7f80_0000 | ((magnitude & 0x3ff) << 13));
        }
        // Moved into place and scaled by 2^112: re-biases normals, normalises subnormals.
        let value = f32::from_bits(magnitude << 13) * f32::from_bits(0x7780_0000);
        f32::from_bits(sign | value.to_bits())
    }

    /// `x` rounded to the nearest binary16, ties to even (as the library's casts).
    pub fn from_f32(x: f32) -> F16 {
        let bits = x.to_bits();
        let sign = ((bits >> 16) & 0x8000) as u16;
        let magnitude = bits & 0x7fff_ffff;
        if magnitude > 0x7f80_0000 {
            return F16(sign | 0x7e00 | ((magnitude >> 13) & 0x3ff) as u16);
        }
        if magnitude >= 0x477f_f000 {
            return F16(sign | 0x7c00); // from 65520 up: infinity
        }
        let round =
            |q: u32, rem: u32, half: u32| if rem > half || (rem == half && q & 1 == 1) { q + 1 } else { q };
        if magnitude < 0x3880_0000 {
            // Below 2^-14: a subnormal, in steps of 2^-24.
            let e = magnitude >> 23;
            if e < 102 {
                return F16(sign);
            }
            let m = (magnitude & 0x7f_ffff) | 0x80_0000;
            let shift = 126 - e;
            return F16(sign | round(m >> shift, m & ((1 << shift) - 1), 1 << (shift - 1)) as u16);
        }
        let rebiased = magnitude - 0x3800_0000;
        F16(sign | round(rebiased >> 13, rebiased & 0x1fff, 0x1000) as u16)
    }
}

impl Bf16 {
    /// The exact `f32` value.
    pub fn to_f32(self) -> f32 {
        f32::from_bits(u32::from(self.0) << 16)
    }

    /// `x` rounded to the nearest bfloat16, ties to even.
    pub fn from_f32(x: f32) -> Bf16 {
        let bits = x.to_bits();
        if bits & 0x7fff_ffff > 0x7f80_0000 {
            return Bf16(((bits >> 16) | 0x40) as u16);
        }
        Bf16(((bits + 0x7fff + ((bits >> 16) & 1)) >> 16) as u16)
    }
}

/// A Rust type whose memory layout is exactly one [`DType`]'s. Sealed: the library writes
/// raw bytes into output slices, so only types for which every value it writes is valid may
/// implement it (for `bool`, the C API guarantees that it writes only 0 or 1).
pub trait Element: sealed::Sealed + Copy + Send + Sync + 'static {
    /// The dtype whose elements this type holds.
    const DTYPE: DType;
}

impl Element for f32 {
    const DTYPE: DType = DType::F32;
}
impl Element for f64 {
    const DTYPE: DType = DType::F64;
}
impl Element for i32 {
    const DTYPE: DType = DType::I32;
}
impl Element for i64 {
    const DTYPE: DType = DType::I64;
}
impl Element for bool {
    const DTYPE: DType = DType::Bool;
}
impl Element for F16 {
    const DTYPE: DType = DType::F16;
}
impl Element for Bf16 {
    const DTYPE: DType = DType::BF16;
}

/// The type of a traced value or a program's input/output.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TensorType {
    /// The element type.
    pub dtype: DType,
    /// The extent of each axis (empty for a scalar).
    pub shape: Vec<i64>,
}

/// Shape and strides stored inline, so a view costs no allocation and the `tm_tensor`
/// built from it can point into it.
#[derive(Clone, Copy, Debug)]
struct Layout {
    rank: usize,
    shape: [i64; MAX_RANK],
    strides: Option<[i64; MAX_RANK]>,
}

impl Layout {
    /// Checks that a slice of `len` elements holds every element the shape (and strides)
    /// address: the C side trusts the view, so a short slice would be an out-of-bounds read
    /// or write. Contiguous views must match exactly, which also catches swapped dims.
    fn new(len: usize, shape: &[i64], strides: Option<&[i64]>) -> Result<Layout> {
        let bad = |msg: String| Err(Error::new(ErrorKind::Shape, msg));
        if shape.len() > MAX_RANK {
            return bad(format!("rank {} exceeds the maximum {MAX_RANK}", shape.len()));
        }
        if let Some(&d) = shape.iter().find(|&&d| d < 0) {
            return bad(format!("negative dimension {d} in shape {shape:?}"));
        }
        let mut layout = Layout { rank: shape.len(), shape: [0; MAX_RANK], strides: None };
        layout.shape[..shape.len()].copy_from_slice(shape);
        let overflow = || Error::new(ErrorKind::Shape, format!("shape {shape:?} is too large"));
        match strides {
            None => {
                let count = shape.iter().try_fold(1i64, |n, &d| n.checked_mul(d)).ok_or_else(overflow)?;
                if count as u128 != len as u128 {
                    return bad(format!("shape {shape:?} has {count} elements but the slice has {len}"));
                }
            }
            Some(strides) => {
                if strides.len() != shape.len() {
                    return bad(format!("{} strides for a shape of rank {}", strides.len(), shape.len()));
                }
                if let Some(&s) = strides.iter().find(|&&s| s < 0) {
                    return bad(format!("negative stride {s} in {strides:?}"));
                }
                // Highest element index addressed, plus one (0 for an empty tensor).
                let needed = if shape.contains(&0) {
                    0
                } else {
                    shape
                        .iter()
                        .zip(strides)
                        .try_fold(1i64, |n, (&d, &s)| (d - 1).checked_mul(s).and_then(|x| x.checked_add(n)))
                        .ok_or_else(overflow)?
                };
                if needed as u128 > len as u128 {
                    return bad(format!(
                        "shape {shape:?} with strides {strides:?} reaches element {} of a slice of {len}",
                        needed - 1
                    ));
                }
                let mut s = [0; MAX_RANK];
                s[..strides.len()].copy_from_slice(strides);
                layout.strides = Some(s);
            }
        }
        Ok(layout)
    }

    fn raw(&self, data: *mut c_void, dtype: DType) -> sys::tm_tensor {
        sys::tm_tensor {
            // data / const_data, one pointer (an anonymous union in tinymlir.h).
            __bindgen_anon_1: sys::tm_tensor__bindgen_ty_1 { data },
            dtype: dtype.raw(),
            rank: self.rank as i32,
            shape: self.shape.as_ptr(),
            strides: self.strides.as_ref().map_or(std::ptr::null(), |s| s.as_ptr()),
        }
    }
}

/// A read-only view of a tensor in a borrowed slice: an input to [`Program::invoke`] or the
/// data of [`Trace::constant`].
///
/// [`Program::invoke`]: crate::Program::invoke
/// [`Trace::constant`]: crate::Trace::constant
#[derive(Clone, Copy, Debug)]
pub struct TensorRef<'a> {
    data: *const c_void,
    dtype: DType,
    layout: Layout,
    _data: PhantomData<&'a [u8]>,
}

// A TensorRef is a shared borrow of Send + Sync elements, like &[T].
unsafe impl Send for TensorRef<'_> {}
unsafe impl Sync for TensorRef<'_> {}

impl<'a> TensorRef<'a> {
    /// A C-contiguous view; `data.len()` must equal the product of `shape` (`&[]` = scalar).
    pub fn new<T: Element>(data: &'a [T], shape: &[i64]) -> Result<TensorRef<'a>> {
        let layout = Layout::new(data.len(), shape, None)?;
        Ok(TensorRef { data: data.as_ptr().cast(), dtype: T::DTYPE, layout, _data: PhantomData })
    }

    /// A strided view; `strides` count elements (not bytes), one per dim, non-negative.
    /// Every addressed element must lie inside `data`.
    pub fn with_strides<T: Element>(data: &'a [T], shape: &[i64], strides: &[i64]) -> Result<TensorRef<'a>> {
        let layout = Layout::new(data.len(), shape, Some(strides))?;
        Ok(TensorRef { data: data.as_ptr().cast(), dtype: T::DTYPE, layout, _data: PhantomData })
    }

    /// The element type of the view.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The extent of each axis.
    pub fn shape(&self) -> &[i64] {
        &self.layout.shape[..self.layout.rank]
    }

    /// The C view; it points into `self`, so it is valid while `self` is neither moved nor
    /// dropped.
    pub(crate) fn raw(&self) -> sys::tm_tensor {
        self.layout.raw(self.data as *mut c_void, self.dtype)
    }

    /// A C-contiguous view of `bytes` bytes of memory at `data` that the library reads in
    /// place (a device buffer's: [`crate::DeviceBuffer::tensor`]).
    pub(crate) fn in_memory(data: *const c_void, bytes: usize, dtype: DType, shape: &[i64]) -> Result<TensorRef<'a>> {
        let layout = Layout::new(elements_in(bytes, dtype, shape)?, shape, None)?;
        Ok(TensorRef { data, dtype, layout, _data: PhantomData })
    }
}

/// How many elements of `dtype` a contiguous `shape` has, checking that they fit in `bytes`.
fn elements_in(bytes: usize, dtype: DType, shape: &[i64]) -> Result<usize> {
    if dtype.size() == 0 {
        return Err(Error::new(ErrorKind::DType, format!("{dtype:?} has no element size for a tensor view")));
    }
    let count = shape
        .iter()
        .try_fold(1usize, |n, &d| usize::try_from(d).ok().and_then(|d| n.checked_mul(d)))
        .ok_or_else(|| Error::new(ErrorKind::Shape, format!("shape {shape:?} is negative or too large")))?;
    match count.checked_mul(dtype.size()) {
        Some(needed) if needed <= bytes => Ok(count),
        _ => Err(Error::new(
            ErrorKind::OutOfRange,
            format!("a {dtype:?} tensor of shape {shape:?} needs more than the {bytes} bytes it is given"),
        )),
    }
}

/// A writable view of a tensor in a borrowed slice: an output of [`Program::invoke`].
///
/// [`Program::invoke`]: crate::Program::invoke
#[derive(Debug)]
pub struct TensorMut<'a> {
    data: *mut c_void,
    dtype: DType,
    layout: Layout,
    _data: PhantomData<&'a mut [u8]>,
}

// An exclusive borrow of Send + Sync elements, like &mut [T]; &TensorMut allows no writes.
unsafe impl Send for TensorMut<'_> {}
unsafe impl Sync for TensorMut<'_> {}

impl<'a> TensorMut<'a> {
    /// A C-contiguous view; `data.len()` must equal the product of `shape`.
    pub fn new<T: Element>(data: &'a mut [T], shape: &[i64]) -> Result<TensorMut<'a>> {
        let layout = Layout::new(data.len(), shape, None)?;
        Ok(TensorMut { data: data.as_mut_ptr().cast(), dtype: T::DTYPE, layout, _data: PhantomData })
    }

    /// A strided view (see [`TensorRef::with_strides`]); written through a temporary.
    pub fn with_strides<T: Element>(
        data: &'a mut [T],
        shape: &[i64],
        strides: &[i64],
    ) -> Result<TensorMut<'a>> {
        let layout = Layout::new(data.len(), shape, Some(strides))?;
        Ok(TensorMut { data: data.as_mut_ptr().cast(), dtype: T::DTYPE, layout, _data: PhantomData })
    }

    /// The element type of the view.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The extent of each axis.
    pub fn shape(&self) -> &[i64] {
        &self.layout.shape[..self.layout.rank]
    }

    /// The C view (see [`TensorRef::raw`]); `&mut self` because the library writes through it.
    pub(crate) fn raw(&mut self) -> sys::tm_tensor {
        self.layout.raw(self.data, self.dtype)
    }

    /// A C-contiguous view of `bytes` bytes of memory at `data` that the library writes in
    /// place (a device buffer's: [`crate::DeviceBuffer::tensor_mut`]).
    pub(crate) fn in_memory(data: *mut c_void, bytes: usize, dtype: DType, shape: &[i64]) -> Result<TensorMut<'a>> {
        let layout = Layout::new(elements_in(bytes, dtype, shape)?, shape, None)?;
        Ok(TensorMut { data, dtype, layout, _data: PhantomData })
    }
}
