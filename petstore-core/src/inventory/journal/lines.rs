//! The journal's streaming reader: [`Lines`] cuts a stream into lines
//! with bounded memory, shared by replay and by `check`/`repair`.

use std::io::{self, BufRead, BufReader, Read};

use super::record::MAX_RECORD_LEN;

/// How much of the journal is read at a time. Replay of a million pets
/// reads about 100 MB: in 1 MiB reads that is about a hundred system
/// calls, not the twelve thousand of `BufReader`'s default 8 KiB. Being
/// many records long, it also holds almost every line whole, and a line
/// that lies whole in the buffer is checked where it lies, not copied.
/// Memory is this buffer plus one record, whatever the journal's size.
pub(super) const READ_BUFFER: usize = 1 << 20;

/// One line of the journal, as [`Lines::next_line`] reads it.
#[derive(Debug)]
pub(crate) enum Line<'a> {
    /// A line that ends in a newline, given without it.
    Complete(&'a [u8]),
    /// The last line, without a newline, and no longer than
    /// [`MAX_RECORD_LEN`]: what a torn write leaves.
    Unterminated(&'a [u8]),
    /// A line longer than [`MAX_RECORD_LEN`], terminated or not (that is
    /// not known yet): no record, ever. Only its first `MAX_RECORD_LEN + 1`
    /// bytes are read; [`Lines::skip_rest`] reads past the rest.
    TooLong,
}

/// The journal's lines, read from a stream with bounded memory: the read
/// buffer, plus at most `MAX_RECORD_LEN + 1` bytes gathered for a line
/// that straddles the buffer's end. Replay and `check`/`repair` share it,
/// so that they cut lines, and call a line too long, the same way.
pub(crate) struct Lines<R> {
    reader: BufReader<R>,
    /// Bytes of the reader's buffer still lent out by the last line
    /// (handed out where it lies, see `READ_BUFFER`): consumed by the next
    /// call, once that borrow is over.
    pending: usize,
    /// A line that straddles the end of the buffer, gathered here.
    line: Vec<u8>,
    /// Offset in the stream where the last line returned starts.
    start: u64,
    /// Offset just past what has been read: past the last line returned
    /// and its newline (or past the part of a too-long line read so far).
    end: u64,
}

impl<R: Read> Lines<R> {
    pub(crate) fn new(inner: R) -> Self {
        Self::with_capacity(READ_BUFFER, inner)
    }

    fn with_capacity(capacity: usize, inner: R) -> Self {
        Lines {
            reader: BufReader::with_capacity(capacity, inner),
            pending: 0,
            line: Vec::new(),
            start: 0,
            end: 0,
        }
    }

    /// Where the last line returned starts.
    pub(crate) fn start(&self) -> u64 {
        self.start
    }

    /// Bytes read so far: the end of the last line returned, its newline
    /// included (at the end of the stream, its length).
    pub(crate) fn end(&self) -> u64 {
        self.end
    }

    /// The next line, or `None` at the end of the stream.
    pub(crate) fn next_line(&mut self) -> io::Result<Option<Line<'_>>> {
        self.reader.consume(std::mem::take(&mut self.pending));
        self.line.clear();
        self.start = self.end;
        loop {
            let buf = fill(&mut self.reader)?;
            if buf.is_empty() {
                return Ok((!self.line.is_empty()).then_some(Line::Unterminated(&self.line)));
            }
            // The newline of a record comes at most `MAX_RECORD_LEN` bytes
            // into its line: look no further, so that a line of garbage is
            // never gathered beyond that.
            let room = MAX_RECORD_LEN + 1 - self.line.len();
            let window = &buf[..buf.len().min(room)];
            if let Some(at) = window.iter().position(|b| *b == b'\n') {
                self.end += at as u64 + 1;
                if self.line.is_empty() {
                    // The common case: the whole line is in the buffer.
                    self.pending = at + 1;
                    return Ok(Some(Line::Complete(&self.reader.buffer()[..at])));
                }
                self.line.extend_from_slice(&window[..at]);
                self.reader.consume(at + 1);
                return Ok(Some(Line::Complete(&self.line)));
            }
            let taken = window.len();
            self.line.extend_from_slice(window);
            self.reader.consume(taken);
            self.end += taken as u64;
            if self.line.len() > MAX_RECORD_LEN {
                return Ok(Some(Line::TooLong));
            }
        }
    }

    /// Reads past the rest of a [`Line::TooLong`], a buffer at a time
    /// (never holding it), and says whether it ended in a newline.
    pub(crate) fn skip_rest(&mut self) -> io::Result<bool> {
        loop {
            let buf = fill(&mut self.reader)?;
            if buf.is_empty() {
                return Ok(false);
            }
            let (taken, newline) = match buf.iter().position(|b| *b == b'\n') {
                Some(at) => (at + 1, true),
                None => (buf.len(), false),
            };
            self.reader.consume(taken);
            self.end += taken as u64;
            if newline {
                return Ok(true);
            }
        }
    }
}

/// `reader`'s buffer, refilled if empty; a read interrupted by a signal
/// (EINTR) is retried rather than taken for a failure of the journal.
fn fill<R: Read>(reader: &mut BufReader<R>) -> io::Result<&[u8]> {
    loop {
        match reader.fill_buf() {
            Ok(_) => return Ok(reader.buffer()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
}

/// Why a [`Line::TooLong`] is refused, for replay (which stops at it and
/// does not read the rest of it).
pub(crate) fn too_long_reason() -> String {
    format!(
        "line longer than {MAX_RECORD_LEN} bytes, the most a record can be: \
         not a record, and not a torn write"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `Lines` should give for `bytes`: a reference made the slow,
    /// obvious way, over the whole input in memory.
    #[derive(Debug, PartialEq, Eq)]
    enum Want {
        Complete(Vec<u8>),
        Unterminated(Vec<u8>),
        TooLong { terminated: bool },
    }

    fn reference(bytes: &[u8]) -> Vec<(u64, u64, Want)> {
        let mut out = Vec::new();
        let mut start = 0;
        while start < bytes.len() {
            let rest = &bytes[start..];
            let (line, terminated) = match rest.iter().position(|b| *b == b'\n') {
                Some(at) => (&rest[..at], true),
                None => (rest, false),
            };
            let end = start + line.len() + usize::from(terminated);
            let want = match (line.len() > MAX_RECORD_LEN, terminated) {
                (true, _) => Want::TooLong { terminated },
                (false, true) => Want::Complete(line.to_vec()),
                (false, false) => Want::Unterminated(line.to_vec()),
            };
            out.push((start as u64, end as u64, want));
            start = end;
        }
        out
    }

    fn read_lines(bytes: &[u8], capacity: usize) -> Vec<(u64, u64, Want)> {
        let mut lines = Lines::with_capacity(capacity, bytes);
        let mut out = Vec::new();
        loop {
            let want = match lines.next_line().unwrap() {
                None => break,
                Some(Line::Complete(l)) => Want::Complete(l.to_vec()),
                Some(Line::Unterminated(l)) => Want::Unterminated(l.to_vec()),
                Some(Line::TooLong) => Want::TooLong {
                    terminated: lines.skip_rest().unwrap(),
                },
            };
            out.push((lines.start(), lines.end(), want));
        }
        assert_eq!(lines.end(), bytes.len() as u64);
        out
    }

    #[test]
    fn lines_are_cut_at_the_bound_whatever_the_buffer() {
        let max = MAX_RECORD_LEN;
        let line = |n: usize, end: &[u8]| [vec![b'x'; n], end.to_vec()].concat();
        let inputs: Vec<Vec<u8>> = vec![
            Vec::new(),
            b"\n\n".to_vec(),
            b"a\nbc\nd".to_vec(),
            // On the bound: a record may be this long, terminated or not.
            line(max, b"\n"),
            line(max, b""),
            // One past it: too long, terminated or not, never torn.
            line(max + 1, b"\n"),
            line(max + 1, b""),
            [
                line(3, b"\n"),
                line(max + 1, b"\n"),
                line(5, b"\n"),
                line(2, b""),
            ]
            .concat(),
            [line(max, b"\n"), line(3 * max, b"")].concat(),
            [line(10, b"\n"), line(max - 1, b"\n"), line(max, b"")].concat(),
        ];
        for bytes in &inputs {
            let want = reference(bytes);
            // Buffers smaller than a line, around it, and larger than
            // everything: lines straddle refills in every way.
            for capacity in [1, 2, 7, 4096, max - 1, max, max + 1, max + 2, READ_BUFFER] {
                assert_eq!(read_lines(bytes, capacity), want, "capacity {capacity}");
            }
        }
    }
}
