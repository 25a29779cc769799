//! The process's allocator: mimalloc, with a first arena sized for what `mur` uses.
//!
//! Actors allocate a message on one runtime thread and free it on another; glibc's malloc
//! serializes those frees on arena locks, mimalloc does not (measured with `delegation_bench`:
//! 10,000 children fan out 20–30% faster, delegate-task to first model call p50 ~90 → ~65 µs).
//!
//! mimalloc reserves its first arena at the first allocation, 1 GiB by default, and sets up
//! that arena's bitmaps (one bit per 64 KiB slice in each of some 80 bitmaps): about 40
//! pages written, each a page fault, on every start. A one-turn run allocates a few MiB, and
//! the 10,000-child fan-out's peak is under 100 MiB. So the first arena is 64 MiB (mimalloc
//! grows later arenas itself: a new one when one is full, and twice the size every eight):
//! one scripted turn, 357 → 311 page faults and 0.1–0.2 ms less start to exit; the fan-out is as
//! fast as before or faster (docs/architecture.md, start-up). `MIMALLOC_ARENA_RESERVE` still
//! wins when it is set.

/// The allocator of `mur` and of everything linking this crate (tests, benches).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The first arena's size, in KiB (the unit of mimalloc's option).
#[cfg(target_os = "linux")]
const FIRST_ARENA_KIB: std::ffi::c_long = 64 * 1024;

/// `mi_option_arena_reserve` in mimalloc v3's `mi_option_t` (include/mimalloc.h of
/// libmimalloc-sys 0.1.49; the crate exports no constant for it). A test checks that the
/// option it names is the arena's size.
#[cfg(target_os = "linux")]
const MI_OPTION_ARENA_RESERVE: libmimalloc_sys::mi_option_t = 23;

/// Runs before `main` and before Rust's own start, which allocates (and so reserves the first
/// arena) before `main` is called. mimalloc's constructor (priority 101) has read its options
/// from the environment by then, so an explicit `MIMALLOC_ARENA_RESERVE` is looked for here and
/// left alone.
#[cfg(target_os = "linux")]
extern "C" fn size_first_arena() {
    // SAFETY: getenv with a NUL-terminated name, at a time no other thread exists; the result
    // is only compared with null.
    let set_by_user = unsafe { !libc::getenv(c"MIMALLOC_ARENA_RESERVE".as_ptr()).is_null() };
    if !set_by_user {
        // SAFETY: one store into mimalloc's option table, before any other thread exists.
        unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_ARENA_RESERVE, FIRST_ARENA_KIB) };
    }
}

/// The constructor's entry: the loader runs `.init_array` entries after mimalloc's (priority
/// 101) and before Rust's start. (Linux only: elsewhere mimalloc's default arena stands.)
#[cfg(target_os = "linux")]
#[used]
#[link_section = ".init_array"]
static SIZE_FIRST_ARENA: extern "C" fn() = size_first_arena;

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// The address range of the mapping that holds `addr`, from /proc/self/maps.
    fn mapping_of(addr: usize) -> (usize, usize) {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        maps.lines()
            .filter_map(|line| {
                let range = line.split_whitespace().next()?;
                let (lo, hi) = range.split_once('-')?;
                Some((
                    usize::from_str_radix(lo, 16).ok()?,
                    usize::from_str_radix(hi, 16).ok()?,
                ))
            })
            .find(|(lo, hi)| (*lo..*hi).contains(&addr))
            .expect("the address is mapped")
    }

    #[test]
    fn the_option_set_before_main_is_the_first_arenas_size() {
        // SAFETY: reads one entry of mimalloc's option table.
        let kib = unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_ARENA_RESERVE) };
        assert_eq!(kib, FIRST_ARENA_KIB);
        // A small block lives in an arena: the mapping that holds it is the arena (64 MiB, or
        // a few of them side by side), not mimalloc's 1 GiB default. Were the option's index
        // wrong (a mimalloc upgrade), the arena would be 1 GiB and another option changed.
        let block = Box::new([7u8; 64]);
        let (lo, hi) = mapping_of(block.as_ptr() as usize);
        let size = hi - lo;
        assert!(
            size < 1 << 30,
            "the arena holding a small block is {size} bytes, mimalloc's 1 GiB default"
        );
        assert!(size >= FIRST_ARENA_KIB as usize * 1024, "{size} bytes");
    }

    /// Run as its own child (this test binary again) with `MIMALLOC_ARENA_RESERVE` set: the
    /// child prints the option's value as mimalloc holds it.
    #[test]
    fn an_explicit_mimalloc_arena_reserve_is_left_alone() {
        if std::env::var_os("MUR_ALLOCATOR_CHILD").is_some() {
            // SAFETY: reads one entry of mimalloc's option table.
            let kib = unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_ARENA_RESERVE) };
            println!("arena_reserve_kib={kib}");
            return;
        }
        let me = std::env::current_exe().unwrap();
        let out = std::process::Command::new(me)
            .args([
                "--exact",
                "allocator::tests::an_explicit_mimalloc_arena_reserve_is_left_alone",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("MUR_ALLOCATOR_CHILD", "1")
            .env("MIMALLOC_ARENA_RESERVE", "256MiB")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{stdout}");
        assert!(stdout.contains("arena_reserve_kib=262144"), "{stdout}");
    }
}
