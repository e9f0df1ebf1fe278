package tinymlir

/*
#include <stdlib.h>
#include <tinymlir/tinymlir.h>
*/
import "C"

import (
	"runtime"
	"sync"
	"unsafe"
)

// DeviceBuffer is memory on a target's device that programs read and write in place, for
// tensors that stay there across calls (tm_device_buffer). The host reaches its bytes only
// through Write, Read, CopyFrom and Fill: on the GPU the memory is the device's. A device
// does everything in the order it was asked for; only reads wait for it. Safe for
// concurrent use; Close frees it (a finalizer does too).
type DeviceBuffer struct {
	// mu guards c: calls share it, Close takes it alone.
	mu sync.RWMutex
	c  *C.tm_device_buffer
}

// NewDeviceBuffer makes n zero bytes on target's device (tm_device_buffer_create).
func NewDeviceBuffer(target Target, n int) (*DeviceBuffer, error) {
	if err := checkABI(); err != nil {
		return nil, err
	}
	if n < 0 {
		return nil, newError(StatusInvalidArgument, "a device buffer of %d bytes", n)
	}
	var c *C.tm_device_buffer
	if err := call(func() C.tm_status {
		return C.tm_device_buffer_create(C.tm_target(target), C.size_t(n), &c)
	}); err != nil {
		return nil, err
	}
	b := &DeviceBuffer{c: c}
	runtime.SetFinalizer(b, (*DeviceBuffer).Close)
	return b, nil
}

// Close frees the buffer once the work asked of it is done. Closing twice is fine.
func (b *DeviceBuffer) Close() error {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	runtime.SetFinalizer(b, nil)
	C.tm_device_buffer_destroy(b.c) // accepts NULL
	b.c = nil
	return nil
}

func (b *DeviceBuffer) use(f func(*C.tm_device_buffer) error) error {
	if b == nil {
		return newError(StatusInvalidArgument, "the device buffer is nil")
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.c == nil {
		return newError(StatusInvalidArgument, "the device buffer is closed")
	}
	return f(b.c)
}

// Len is the buffer's size in bytes (0 once closed).
func (b *DeviceBuffer) Len() int {
	n := 0
	_ = b.use(func(c *C.tm_device_buffer) error { n = int(C.tm_device_buffer_size(c)); return nil })
	return n
}

// Target is the target whose device holds the buffer.
func (b *DeviceBuffer) Target() Target {
	t := CPU
	_ = b.use(func(c *C.tm_device_buffer) error { t = Target(C.tm_device_buffer_target(c)); return nil })
	return t
}

func bytesOf[T Element](data []T) (unsafe.Pointer, int) {
	if len(data) == 0 {
		return nil, 0
	}
	return unsafe.Pointer(&data[0]), len(data) * int(unsafe.Sizeof(data[0]))
}

func checkOffset(what string, offset int) error {
	if offset < 0 {
		return newError(StatusOutOfRange, "%s: negative offset %d", what, offset)
	}
	return nil
}

// Write copies data into b from byte offset; data may be reused when it returns.
func Write[T Element](b *DeviceBuffer, offset int, data []T) error {
	if err := checkOffset("Write", offset); err != nil {
		return err
	}
	p, n := bytesOf(data)
	return b.use(func(c *C.tm_device_buffer) error {
		return call(func() C.tm_status {
			return C.tm_device_buffer_write(c, C.size_t(offset), p, C.size_t(n))
		})
	})
}

// Read fills out from b's byte offset, once the work asked for before is done.
func Read[T Element](b *DeviceBuffer, offset int, out []T) error {
	if err := checkOffset("Read", offset); err != nil {
		return err
	}
	p, n := bytesOf(out)
	return b.use(func(c *C.tm_device_buffer) error {
		return call(func() C.tm_status {
			return C.tm_device_buffer_read(c, C.size_t(offset), p, C.size_t(n))
		})
	})
}

// CopyFrom copies n bytes of src from srcOffset to b's offset, on the device.
func (b *DeviceBuffer) CopyFrom(offset int, src *DeviceBuffer, srcOffset, n int) error {
	if offset < 0 || srcOffset < 0 || n < 0 {
		return newError(StatusOutOfRange, "CopyFrom: offsets %d and %d, %d bytes", offset, srcOffset, n)
	}
	return b.use(func(dst *C.tm_device_buffer) error {
		return src.use(func(s *C.tm_device_buffer) error {
			return call(func() C.tm_status {
				return C.tm_device_buffer_copy(dst, C.size_t(offset), s, C.size_t(srcOffset), C.size_t(n))
			})
		})
	})
}

// Fill sets n bytes from offset to value.
func (b *DeviceBuffer) Fill(offset int, value byte, n int) error {
	if offset < 0 || n < 0 {
		return newError(StatusOutOfRange, "Fill: offset %d, %d bytes", offset, n)
	}
	return b.use(func(c *C.tm_device_buffer) error {
		return call(func() C.tm_status {
			return C.tm_device_buffer_fill(c, C.size_t(offset), C.uint8_t(value), C.size_t(n))
		})
	})
}

// Tensor is a C-contiguous tensor of dtype and shape in b from byte offset, for Invoke's
// inputs and outputs: the program reads or writes the buffer where it is.
func (b *DeviceBuffer) Tensor(dtype DType, offset int, shape ...int64) (Tensor, error) {
	if err := checkOffset("Tensor", offset); err != nil {
		return Tensor{}, err
	}
	if len(shape) > MaxRank {
		return Tensor{}, newError(StatusShape, "rank %d exceeds the maximum %d", len(shape), MaxRank)
	}
	if dtype.Size() == 0 {
		return Tensor{}, newError(StatusDType, "%v has no element size for a tensor", dtype)
	}
	count := int64(1)
	for _, d := range shape {
		if d < 0 {
			return Tensor{}, newError(StatusShape, "negative dimension %d in shape %v", d, shape)
		}
		count *= d
	}
	t := Tensor{dtype: dtype, shape: append([]int64(nil), shape...), buffer: b}
	err := b.use(func(c *C.tm_device_buffer) error {
		size := int64(C.tm_device_buffer_size(c))
		if int64(offset) > size || count*int64(dtype.Size()) > size-int64(offset) {
			return newError(StatusOutOfRange, "a %v tensor of shape %v at byte %d runs past the end of a device buffer of %d bytes",
				dtype, shape, offset, size)
		}
		t.device = unsafe.Add(C.tm_device_buffer_data(c), offset)
		return nil
	})
	return t, err
}
