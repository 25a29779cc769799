//! A request body sent as pieces: the bytes written for this call, and the history's kept
//! encoding lent without a copy.
//!
//! Why: a session's request carries its whole history, and the history's encoding is kept
//! between calls (`super::encode`). Building one contiguous body copied that encoding every
//! call, a copy that grows with the conversation (47 KB a turn at 300 turns in turn_bench). The
//! kept encoding is an `Arc<Vec<u8>>` instead, lent to the body as a [`Bytes`] that holds a
//! reference, and the body goes out as a list of pieces with its exact length. By the next call
//! the sent body has been dropped, so appending to the encoding finds it unshared and writes in
//! place; if a body is still alive somewhere (a request cut off mid-flight), the append copies
//! first ([`Arc::make_mut`]) and the lent bytes stay as they were sent.
//!
//! The length is exact, so hyper sends `content-length`, never `transfer-encoding: chunked`
//! (which some OpenAI-compatible servers refuse), and the pieces go out in one `writev`.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Frame, SizeHint};

/// An encoding lent to a body: the bytes stay alive (and unchanged) while a piece holds them.
struct Lent(Arc<Vec<u8>>);

impl AsRef<[u8]> for Lent {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

/// Lends `bytes[from..to]` as a piece, without copying it.
pub(crate) fn lend(bytes: &Arc<Vec<u8>>, from: usize, to: usize) -> Bytes {
    Bytes::from_owner(Lent(bytes.clone())).slice(from..to)
}

/// A request body: pieces sent one after the other, cheap to clone for a retry.
#[derive(Clone, Debug, Default)]
pub(crate) struct RequestBody {
    pieces: Vec<Bytes>,
    len: usize,
}

impl RequestBody {
    /// The whole body as one buffer (a copy): what the tests compare and the traces show.
    pub(crate) fn to_vec(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.len);
        for piece in &self.pieces {
            out.extend_from_slice(piece);
        }
        out
    }

    /// Its length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The body as reqwest sends it: one buffer as is, several as a stream of known length.
    pub(crate) fn to_reqwest(&self) -> reqwest::Body {
        match self.pieces.as_slice() {
            [] => reqwest::Body::from(Bytes::new()),
            [one] => reqwest::Body::from(one.clone()),
            _ => reqwest::Body::wrap(Pieces {
                pieces: self.pieces.iter().cloned().collect(),
                left: self.len as u64,
            }),
        }
    }
}

/// Builds a [`RequestBody`]: bytes written into `out`, and lent pieces between them.
#[derive(Default)]
pub(crate) struct BodyWriter {
    /// The bytes written since the last lent piece.
    pub(crate) out: Vec<u8>,
    pieces: Vec<Bytes>,
    len: usize,
}

impl BodyWriter {
    /// A writer whose first buffer has room for `capacity` bytes.
    pub(crate) fn with_capacity(capacity: usize) -> BodyWriter {
        BodyWriter {
            out: Vec::with_capacity(capacity),
            ..BodyWriter::default()
        }
    }

    /// Appends a lent piece after what was written so far.
    pub(crate) fn lend(&mut self, piece: Bytes) {
        if piece.is_empty() {
            return;
        }
        self.flush();
        self.len += piece.len();
        self.pieces.push(piece);
    }

    fn flush(&mut self) {
        if !self.out.is_empty() {
            let out = std::mem::take(&mut self.out);
            self.len += out.len();
            self.pieces.push(Bytes::from(out));
        }
    }

    /// The body.
    pub(crate) fn finish(mut self) -> RequestBody {
        self.flush();
        RequestBody {
            pieces: self.pieces,
            len: self.len,
        }
    }
}

/// The pieces left to send, as an `http_body::Body` of exact length.
struct Pieces {
    pieces: VecDeque<Bytes>,
    left: u64,
}

impl http_body::Body for Pieces {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let next = self.pieces.pop_front();
        if let Some(piece) = &next {
            self.left -= piece.len() as u64;
        }
        Poll::Ready(next.map(|piece| Ok(Frame::data(piece))))
    }

    fn is_end_stream(&self) -> bool {
        self.pieces.is_empty()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.left)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_join_in_order_and_lent_bytes_are_shared_not_copied() {
        let kept = Arc::new(b"0123456789".to_vec());
        let mut w = BodyWriter::with_capacity(8);
        w.out.extend_from_slice(b"{[");
        w.lend(lend(&kept, 0, 4));
        w.out.push(b'|');
        w.lend(lend(&kept, 4, 10));
        w.lend(Bytes::new());
        w.out.extend_from_slice(b"]}");
        let body = w.finish();
        assert_eq!(body.to_vec(), b"{[0123|456789]}");
        assert_eq!(body.len(), 15);
        assert_eq!(body.pieces.len(), 5);
        assert_eq!(body.pieces[1].as_ptr(), kept.as_ptr());
        assert_eq!(Arc::strong_count(&kept), 3);
        drop(body);
        assert_eq!(
            Arc::strong_count(&kept),
            1,
            "a dropped body gives its loans back"
        );
    }

    #[test]
    fn writing_to_a_kept_encoding_never_changes_a_body_that_holds_it() {
        let mut part = crate::drivers::encode::Part::default();
        part.item().extend_from_slice(b"{\"a\":1}");
        let held = part.lend_all();
        let at = part.bytes.as_ptr();
        // A body still holds the bytes: the append copies first, the lent piece stays as sent.
        part.item().extend_from_slice(b"{\"b\":2}");
        assert_eq!(&held[..], b"{\"a\":1}");
        assert_eq!(part.bytes.as_slice(), b"{\"a\":1},{\"b\":2}");
        assert_ne!(part.bytes.as_ptr(), at);
        drop(held);
        // Given back: the next append writes in place (room reserved so it cannot move).
        part.buf().reserve(64);
        let at = part.bytes.as_ptr();
        let lent = part.lend_all();
        drop(lent);
        part.item().extend_from_slice(b"{\"c\":3}");
        assert_eq!(part.bytes.as_ptr(), at);
        part.clear();
        assert!(part.is_empty() && part.bytes.is_empty());
    }
}
