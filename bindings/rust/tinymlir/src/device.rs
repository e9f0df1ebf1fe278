//! Device buffers (`tm_device_buffer`): memory on a target's device that programs read and
//! write in place, for tensors that stay there across calls.

use std::ffi::c_void;

use tinymlir_sys as sys;

use crate::error::{check, Error, ErrorKind, Result};
use crate::program::Target;
use crate::tensor::{DType, Element, TensorMut, TensorRef};

/// `len` bytes on a target's device, zero when made. The host reaches them only through
/// [`write`](Self::write), [`read`](Self::read), [`copy_from`](Self::copy_from) and
/// [`fill`](Self::fill): on the GPU the memory is the device's. [`tensor`](Self::tensor) and
/// [`tensor_mut`](Self::tensor_mut) view it for [`crate::Program::invoke`], which then reads
/// and writes it where it is. A device does everything in the order it was asked for; only
/// reads wait for it.
///
/// ```no_run
/// use tinymlir::{DType, DeviceBuffer, Target};
///
/// let mut x = DeviceBuffer::new(Target::Gpu, 4 * 1024)?;
/// x.write(0, &[1.0f32; 1024])?;
/// let view = x.tensor(DType::F32, &[1024], 0)?; // an input of Program::invoke
/// # let _ = view;
/// let mut back = [0f32; 1024];
/// x.read(0, &mut back)?;
/// # Ok::<(), tinymlir::Error>(())
/// ```
#[derive(Debug)]
pub struct DeviceBuffer {
    raw: *mut sys::tm_device_buffer,
}

// The C API's buffers are usable from any thread; their work is ordered by the device.
unsafe impl Send for DeviceBuffer {}
unsafe impl Sync for DeviceBuffer {}

fn bytes_of<T: Element>(data: &[T]) -> usize {
    std::mem::size_of_val(data)
}

impl DeviceBuffer {
    /// `len` zero bytes on `target`'s device (`tm_device_buffer_create`).
    pub fn new(target: Target, len: usize) -> Result<DeviceBuffer> {
        let mut raw = std::ptr::null_mut();
        check(unsafe { sys::tm_device_buffer_create(target.raw(), len, &mut raw) })?;
        Ok(DeviceBuffer { raw })
    }

    /// Its size in bytes.
    pub fn len(&self) -> usize {
        unsafe { sys::tm_device_buffer_size(self.raw) }
    }

    /// Whether it has no bytes (never: a buffer has at least one).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The target whose device holds it.
    pub fn target(&self) -> Target {
        if unsafe { sys::tm_device_buffer_target(self.raw) } == sys::TM_TARGET_GPU {
            Target::Gpu
        } else {
            Target::Cpu
        }
    }

    /// Copies `data` in from byte `offset`; `data` may be reused at once.
    pub fn write<T: Element>(&mut self, offset: usize, data: &[T]) -> Result<()> {
        check(unsafe {
            sys::tm_device_buffer_write(self.raw, offset, data.as_ptr().cast(), bytes_of(data))
        })
    }

    /// Fills `out` from byte `offset`, once the work asked for before is done.
    pub fn read<T: Element>(&self, offset: usize, out: &mut [T]) -> Result<()> {
        check(unsafe {
            sys::tm_device_buffer_read(self.raw, offset, out.as_mut_ptr().cast(), bytes_of(out))
        })
    }

    /// Copies `len` bytes of `src` from `src_offset` to `offset`, on the device.
    pub fn copy_from(&mut self, offset: usize, src: &DeviceBuffer, src_offset: usize, len: usize) -> Result<()> {
        check(unsafe { sys::tm_device_buffer_copy(self.raw, offset, src.raw, src_offset, len) })
    }

    /// Sets `len` bytes from `offset` to `value`.
    pub fn fill(&mut self, offset: usize, value: u8, len: usize) -> Result<()> {
        check(unsafe { sys::tm_device_buffer_fill(self.raw, offset, value, len) })
    }

    fn at(&self, offset: usize) -> Result<(*mut c_void, usize)> {
        let len = self.len();
        if offset > len {
            return Err(Error::new(
                ErrorKind::OutOfRange,
                format!("byte {offset} is past the end of a device buffer of {len} bytes"),
            ));
        }
        let data = unsafe { sys::tm_device_buffer_data(self.raw) }.cast::<u8>();
        Ok((unsafe { data.add(offset) }.cast(), len - offset))
    }

    /// A C-contiguous input view of `dtype` and `shape` from byte `offset`.
    pub fn tensor(&self, dtype: DType, shape: &[i64], offset: usize) -> Result<TensorRef<'_>> {
        let (data, available) = self.at(offset)?;
        TensorRef::in_memory(data, available, dtype, shape)
    }

    /// A C-contiguous output view of `dtype` and `shape` from byte `offset`.
    pub fn tensor_mut(&mut self, dtype: DType, shape: &[i64], offset: usize) -> Result<TensorMut<'_>> {
        let (data, available) = self.at(offset)?;
        TensorMut::in_memory(data, available, dtype, shape)
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        unsafe { sys::tm_device_buffer_destroy(self.raw) }
    }
}
