//! Model drivers behind the kernel's `ModelDriver` trait. (HTTP drivers: issue 3.)
