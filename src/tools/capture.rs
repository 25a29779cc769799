//! Capturing a subprocess's output stream with a cap.
//!
//! A command may print megabytes. We keep the first [`STREAM_CAP`] bytes for the model, count
//! everything, and spool the whole stream to a log file in the records folder once it passes the
//! cap, so nothing is lost and memory stays bounded.

use std::path::PathBuf;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

/// Bytes of each stream the model sees.
pub const STREAM_CAP: usize = 16 * 1024;

/// What was read from one stream.
#[derive(Debug, Default)]
pub struct Captured {
    /// The first [`STREAM_CAP`] bytes.
    pub head: Vec<u8>,
    /// Every byte seen.
    pub total: u64,
    /// Where the whole stream went, once it passed the cap.
    pub spooled: Option<PathBuf>,
}

impl Captured {
    /// The kept bytes as text (invalid UTF-8 replaced).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.head).into_owned()
    }

    /// True when the model sees less than the command wrote.
    pub fn truncated(&self) -> bool {
        self.total > self.head.len() as u64
    }
}

/// Read `stream` to its end, keeping the head and spooling the rest to `spool` if needed.
pub async fn capture<R: AsyncRead + Unpin>(mut stream: R, spool: PathBuf) -> Captured {
    let mut out = Captured::default();
    let mut file: Option<tokio::fs::File> = None;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match stream.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        out.total += n as u64;
        let room = STREAM_CAP.saturating_sub(out.head.len());
        out.head.extend_from_slice(&buf[..n.min(room)]);
        if out.total > STREAM_CAP as u64 {
            if file.is_none() {
                if let Some(parent) = spool.parent() {
                    let _ = tokio::fs::create_dir_all(parent).await;
                }
                if let Ok(mut f) = tokio::fs::File::create(&spool).await {
                    // Everything before this chunk is exactly the head.
                    let before = out.head.len() - n.min(room);
                    let _ = f.write_all(&out.head[..before]).await;
                    file = Some(f);
                    out.spooled = Some(spool.clone());
                }
            }
            if let Some(f) = file.as_mut() {
                let _ = f.write_all(&buf[..n]).await;
            }
        }
    }
    if let Some(mut f) = file {
        let _ = f.flush().await;
    }
    out
}
