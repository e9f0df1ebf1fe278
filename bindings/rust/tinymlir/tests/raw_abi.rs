//! The C contract itself, through the raw layer (`tinymlir::sys`): options structs of other
//! layouts' sizes (versioned by struct_size) and the snprintf-style size queries, which the
//! safe API never shows (it always passes its own layout and exact buffers).

mod common;

use std::ffi::{CStr, CString};
use std::mem::size_of;
use std::ptr;

use common::{models_dir, test_data_dir};
use tinymlir::sys;

/// The first published layouts (tinymlir.h, gpt2.h).
const FIRST_COMPILE: u32 = 20;
const FIRST_GENERATE: u32 = 40;
const FIRST_MODEL: u32 = 8;
const FIRST_STATS: u32 = 64;
/// Today's layouts: tm_generate_options gained the progress callback, tm_model_stats the
/// disk cache count, the compile phases and the decode time per program kind.
const CURRENT_GENERATE: u32 = 56;
const CURRENT_STATS: u32 = 224;
/// tm_compile_options gained the GPU fields (gpu_sm, gpu_matmul_tile, gpu_cubin).
const CURRENT_COMPILE: u32 = 32;
/// tm_model_options gained bundle_dir, then weights.
const CURRENT_MODEL: u32 = 24;

/// An options struct followed by spare bytes, as a caller built against a newer header
/// would pass it (`struct_size` covering the tail).
#[repr(C)]
struct Newer<T> {
    options: T,
    tail: [u8; 8],
}

fn last_error() -> String {
    unsafe { CStr::from_ptr(sys::tm_last_error()) }.to_string_lossy().into_owned()
}

/// Whether the library reads the struct (options) or fills it (stats).
#[derive(PartialEq)]
enum Direction {
    /// A newer caller's extra bytes must be zero (their defaults): else UNSUPPORTED.
    In,
    /// The library fills the fields it has and leaves a newer caller's extra bytes alone.
    Out,
}

/// Checks the struct_size rules on one call: `call(options)` runs it with the struct there,
/// `base` holds the library's defaults (its own layout). Any size from the first layout up
/// is accepted (see `Direction` for the extra bytes); a smaller one is INVALID_ARGUMENT.
fn check_sizes<T: Copy>(
    what: &str,
    base: T,
    first_layout: u32,
    direction: Direction,
    mut call: impl FnMut(*mut T) -> sys::tm_status,
) {
    let own = size_of::<T>() as u32;
    let mut buf = Newer { options: base, tail: [0; 8] };
    // struct_size is the first field of every options struct.
    let set_size =
        |buf: &mut Newer<T>, size: u32| unsafe { *(&mut buf.options as *mut T).cast::<u32>() = size };

    set_size(&mut buf, first_layout);
    assert_eq!(call(&mut buf.options), sys::TM_OK, "{what}: first layout: {}", last_error());
    set_size(&mut buf, own + 8);
    assert_eq!(call(&mut buf.options), sys::TM_OK, "{what}: newer layout, zero tail: {}", last_error());
    buf.tail[5] = 1;
    if direction == Direction::In {
        assert_eq!(call(&mut buf.options), sys::TM_ERROR_UNSUPPORTED, "{what}: newer layout, non-zero tail");
        assert!(last_error().contains(&(own + 8).to_string()), "{what}: {}", last_error());
    } else {
        assert_eq!(call(&mut buf.options), sys::TM_OK, "{what}: newer layout: {}", last_error());
        assert_eq!(buf.tail[5], 1, "{what}: the library wrote past its own layout");
        assert_eq!(unsafe { *(&buf.options as *const T).cast::<u32>() }, own + 8, "{what}: struct_size");
    }
    buf.tail[5] = 0;
    set_size(&mut buf, first_layout - 4);
    assert_eq!(call(&mut buf.options), sys::TM_ERROR_INVALID_ARGUMENT, "{what}: too small");
    assert!(last_error().contains("struct_size"), "{what}: {}", last_error());
}

/// A struct of our layout filled by its `*_options_init_size` (the header's inline
/// `*_options_init` is not a symbol: bindgen does not see it).
fn init<T>(f: unsafe extern "C" fn(*mut T, usize) -> sys::tm_status) -> T {
    let mut raw = std::mem::MaybeUninit::<T>::zeroed();
    unsafe {
        assert_eq!(f(raw.as_mut_ptr(), std::mem::size_of::<T>()), sys::TM_OK);
        raw.assume_init()
    }
}

fn path(p: std::path::PathBuf) -> CString {
    CString::new(p.to_str().unwrap()).unwrap()
}

#[test]
fn options_structs_of_other_sizes() {
    unsafe {
        let mut ctx = ptr::null_mut();
        assert_eq!(sys::tm_context_create(&mut ctx), sys::TM_OK);
        let mut trace = ptr::null_mut();
        assert_eq!(sys::tm_trace_begin(ctx, ptr::null(), &mut trace), sys::TM_OK);
        let mut x = 0;
        assert_eq!(sys::tm_op_input(trace, sys::TM_F32, 1, [2i64].as_ptr(), &mut x), sys::TM_OK);
        assert_eq!(sys::tm_trace_end(trace, &x, 1), sys::TM_OK);

        check_sizes(
            "tm_compile",
            init(sys::tm_compile_options_init_size),
            FIRST_COMPILE,
            Direction::In,
            |options| {
                let mut program = ptr::null_mut();
                let status = sys::tm_compile(ctx, trace, options, &mut program);
                sys::tm_program_release(program);
                status
            },
        );

        let tiny = path(test_data_dir().join("tiny-a"));
        check_sizes(
            "tm_model_load",
            init(sys::tm_model_options_init_size),
            FIRST_MODEL,
            Direction::In,
            |options| {
                let mut model = ptr::null_mut();
                let status = sys::tm_model_load(ctx, tiny.as_ptr(), options, &mut model);
                sys::tm_model_destroy(model);
                status
            },
        );

        let mut model = ptr::null_mut();
        assert_eq!(sys::tm_model_load(ctx, tiny.as_ptr(), ptr::null(), &mut model), sys::TM_OK);
        let mut generate = init(sys::tm_generate_options_init_size);
        generate.max_new_tokens = 2;
        let prompt = [1i32, 2, 3];
        check_sizes("tm_generate", generate, FIRST_GENERATE, Direction::In, |options| {
            let (mut ids, mut n) = ([0i32; 2], 0usize);
            let status = sys::tm_generate(
                model,
                prompt.as_ptr(),
                3,
                options,
                None,
                ptr::null_mut(),
                ids.as_mut_ptr(),
                2,
                &mut n,
            );
            if status == sys::TM_OK {
                assert_eq!(n, 2);
            }
            status
        });

        let stats: sys::tm_model_stats = std::mem::zeroed();
        check_sizes("tm_model_get_stats", stats, FIRST_STATS, Direction::Out, |stats| {
            sys::tm_model_get_stats(model, stats)
        });

        sys::tm_model_destroy(model);
        sys::tm_trace_destroy(trace);
        sys::tm_context_release(ctx);
    }
    // Today's layouts.
    assert_eq!(size_of::<sys::tm_compile_options>() as u32, CURRENT_COMPILE);
    assert_eq!(size_of::<sys::tm_generate_options>() as u32, CURRENT_GENERATE);
    assert_eq!(size_of::<sys::tm_model_options>() as u32, CURRENT_MODEL);
    assert_eq!(size_of::<sys::tm_model_stats>() as u32, CURRENT_STATS);
}

#[test]
fn size_queries() {
    unsafe {
        let mut ctx = ptr::null_mut();
        assert_eq!(sys::tm_context_create(&mut ctx), sys::TM_OK);
        let dir = path(models_dir().join("kjv-tiny"));
        let mut model = ptr::null_mut();
        assert_eq!(sys::tm_model_load(ctx, dir.as_ptr(), ptr::null(), &mut model), sys::TM_OK);
        sys::tm_context_release(ctx); // the model keeps the context alive

        // Capacity 0 asks for the size; a small buffer gets what fits and the size needed.
        let text = "And God said, Let there be light: and there was light.";
        let mut needed = usize::MAX;
        let status =
            sys::tm_tokenize(model, text.as_ptr().cast(), text.len(), ptr::null_mut(), 0, &mut needed);
        assert_eq!(status, sys::TM_OK, "{}", last_error());
        let mut ids = vec![0i32; needed];
        let mut n = 0;
        assert_eq!(
            sys::tm_tokenize(model, text.as_ptr().cast(), text.len(), ids.as_mut_ptr(), needed, &mut n),
            sys::TM_OK
        );
        assert_eq!(n, needed);
        let mut first = [-1i32; 4];
        assert_eq!(
            sys::tm_tokenize(model, text.as_ptr().cast(), text.len(), first.as_mut_ptr(), 3, &mut n),
            sys::TM_OK
        );
        assert_eq!((n, &first[..]), (needed, &[ids[0], ids[1], ids[2], -1][..]));

        let mut len = usize::MAX;
        assert_eq!(
            sys::tm_detokenize(model, ids.as_ptr(), ids.len(), ptr::null_mut(), 0, &mut len),
            sys::TM_OK
        );
        assert_eq!(len, text.len());
        let mut head = [b'#'; 8];
        assert_eq!(
            sys::tm_detokenize(model, ids.as_ptr(), ids.len(), head.as_mut_ptr().cast(), 5, &mut len),
            sys::TM_OK
        );
        assert_eq!(len, text.len());
        assert_eq!(&head, b"And G###");

        // tm_generate reports how many it made; out_ids may be NULL with capacity 0.
        let mut options = init(sys::tm_generate_options_init_size);
        options.max_new_tokens = 3;
        let mut made = 0;
        let status = sys::tm_generate(
            model,
            ids.as_ptr(),
            ids.len(),
            &options,
            None,
            ptr::null_mut(),
            ptr::null_mut(),
            0,
            &mut made,
        );
        assert_eq!((status, made), (sys::TM_OK, 3));
        sys::tm_model_destroy(model);
    }
}
