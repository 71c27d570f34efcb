// The counting readers' parsers of bench/feed (clients.mjs): they count events in the raw
// bytes of a TCP socket read into a buffer that every counting reader shares (net's `onread`),
// so each call looks at buf[from, to) only: the bytes past `to` are stale, left by another
// socket's longer read, and counting them counted events that were never delivered (3 616 750
// "deliveries" of 998 000 sent, before the search was bounded).

/** A feed event on an SSE stream starts with its `id:` line (`reset` and comments have none). */
const MARKER = Buffer.from('\nid: ');

/**
 * Counts SSE events in successive reads of one stream: `(buf, from, to) => n`, the events
 * whose `id:` line ends in buf[from, to). A line split between reads is carried over as the
 * number of its bytes seen at the end of the previous read (the marker repeats no prefix of
 * itself, so that is all the state a split needs). HTTP chunk framing never falls inside a
 * marker: the tower writes whole events per chunk, JSON escapes newlines, and every `id:`
 * line follows a newline (of the previous event, of `retry:`, or of a chunk-size line).
 */
export function sseCounter() {
  let partial = 0;
  return (buf, from, to) => {
    const view = buf.subarray(from, to);
    const len = view.length;
    let n = 0;
    let start = 0;
    if (partial > 0) {
      const take = Math.min(MARKER.length - partial, len);
      if (view.compare(MARKER, partial, partial + take, 0, take) !== 0) partial = 0;
      else if (partial + take === MARKER.length) {
        n++;
        partial = 0;
        start = take;
      } else {
        partial += take;
        return n;
      }
    }
    let at = view.indexOf(MARKER, start);
    while (at >= 0) {
      n++;
      at = view.indexOf(MARKER, at + MARKER.length);
    }
    for (let k = Math.min(MARKER.length - 1, len - start); k > 0; k--) {
      if (view.compare(MARKER, 0, k, len - k, len) === 0) {
        partial = k;
        break;
      }
    }
    return n;
  };
}

/**
 * Parses the WebSocket frames a server sends (unmasked) in successive reads of one stream:
 * `(buf, from, to) => void`, calling `onPayload(a, b)` with the first two payload bytes of
 * every frame that ends in buf[from, to) (-1 for a byte a shorter payload lacks). For
 * socket.io these are the engine.io and socket.io packet types (`4`,`2`: an event).
 */
export function wsFrames(onPayload) {
  // Header bytes of the current frame seen so far, its payload bytes still to skip (-1:
  // reading a header), and the first two payload bytes.
  const hdr = Buffer.alloc(14);
  let hdrLen = 0;
  let left = -1;
  let seen = 0;
  let a = -1;
  let b = -1;
  return (buf, from, to) => {
    let at = from;
    while (at < to) {
      if (left < 0) {
        // 2 header bytes, then 2 or 8 more for the length (server frames carry no mask).
        hdr[hdrLen++] = buf[at++];
        if (hdrLen < 2) continue;
        const len7 = hdr[1] & 0x7f;
        const need = len7 === 126 ? 4 : len7 === 127 ? 10 : 2;
        if (hdrLen < need) continue;
        left = len7 === 126 ? hdr.readUInt16BE(2) : len7 === 127 ? Number(hdr.readBigUInt64BE(2)) : len7;
        hdrLen = 0;
        seen = 0;
        a = -1;
        b = -1;
        if (left === 0) {
          left = -1;
          onPayload(a, b);
          continue;
        }
      }
      const take = Math.min(left, to - at);
      for (let k = 0; seen < 2 && k < take; k++, seen++) {
        if (seen === 0) a = buf[at + k];
        else b = buf[at + k];
      }
      at += take;
      left -= take;
      if (left === 0) {
        left = -1;
        onPayload(a, b);
      }
    }
  };
}
