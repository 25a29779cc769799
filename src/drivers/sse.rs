//! An incremental server-sent-events parser.
//!
//! Provider streams arrive in arbitrary chunks: an event, a line, even a UTF-8 character can be
//! split across two reads. The parser buffers bytes up to each line end and emits an event at each
//! blank line, so the drivers can assemble a reply while it streams instead of waiting for the
//! whole body. Lines end with `\n` or `\r\n`; `:` lines are comments; `data:` lines of one event
//! are joined with `\n`; one space after the colon is dropped.

/// One dispatched event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SseEvent {
    /// The `event:` field, if any.
    pub event: Option<String>,
    /// The joined `data:` lines.
    pub data: String,
}

/// Incremental parser state.
#[derive(Default)]
pub(crate) struct SseParser {
    line: Vec<u8>,
    event: Option<String>,
    data: Option<String>,
    /// Events dispatched so far (for error messages).
    pub(crate) dispatched: usize,
}

impl SseParser {
    /// Feeds a chunk; complete events are appended to `out`.
    pub(crate) fn push(&mut self, chunk: &[u8], out: &mut Vec<SseEvent>) {
        let mut rest = chunk;
        while let Some(pos) = rest.iter().position(|&b| b == b'\n') {
            self.line.extend_from_slice(&rest[..pos]);
            rest = &rest[pos + 1..];
            if self.line.last() == Some(&b'\r') {
                self.line.pop();
            }
            let line = std::mem::take(&mut self.line);
            self.on_line(&String::from_utf8_lossy(&line), out);
        }
        self.line.extend_from_slice(rest);
    }

    /// Ends the stream: a last event without its blank line is still dispatched.
    pub(crate) fn finish(&mut self, out: &mut Vec<SseEvent>) {
        if !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            self.on_line(&String::from_utf8_lossy(&line), out);
        }
        self.on_line("", out);
    }

    fn on_line(&mut self, line: &str, out: &mut Vec<SseEvent>) {
        if line.is_empty() {
            if let Some(data) = self.data.take() {
                self.dispatched += 1;
                out.push(SseEvent {
                    event: self.event.take(),
                    data,
                });
            }
            self.event = None;
            return;
        }
        if line.starts_with(':') {
            return;
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        match field {
            "event" => self.event = Some(value.to_string()),
            "data" => match &mut self.data {
                Some(d) => {
                    d.push('\n');
                    d.push_str(value);
                }
                None => self.data = Some(value.to_string()),
            },
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_in_pieces(text: &str, piece: usize) -> Vec<SseEvent> {
        let mut p = SseParser::default();
        let mut out = Vec::new();
        for chunk in text.as_bytes().chunks(piece) {
            p.push(chunk, &mut out);
        }
        p.finish(&mut out);
        out
    }

    #[test]
    fn events_survive_any_chunking() {
        let text = "event: a\ndata: {\"x\":\"é\"}\n\n: ping\r\ndata: one\r\ndata:two\r\n\r\nevent: b\ndata: last";
        let want = vec![
            SseEvent {
                event: Some("a".into()),
                data: "{\"x\":\"é\"}".into(),
            },
            SseEvent {
                event: None,
                data: "one\ntwo".into(),
            },
            SseEvent {
                event: Some("b".into()),
                data: "last".into(),
            },
        ];
        for piece in 1..=text.len() {
            assert_eq!(parse_in_pieces(text, piece), want, "piece size {piece}");
        }
    }

    #[test]
    fn an_event_line_without_data_dispatches_nothing() {
        assert!(parse_in_pieces("event: ping\n\n", 4).is_empty());
    }
}
