// The upload route's longer deadlines (LA6). The server reads every
// request within `[pocketbase] read_timeout` (server.pb.js); a route that must
// read longer moves its own connection's deadlines, as Go's
// http.ResponseController does: through the response writer's wrappers to
// the connection's SetReadDeadline and SetWriteDeadline.

// Time left to write the answer once the body is in.
const ANSWER_MS = 60 * 1000;

// Gives the body of `e`'s request `ms` from now to arrive, and its answer a
// minute more to leave. False when the writer offers no deadlines (then the
// server's own timeout holds).
function allowBody(e, ms) {
  let rw = e.response;
  for (let i = 0; i < 8 && rw; i++) {
    if (typeof rw.setReadDeadline === "function" && typeof rw.setWriteDeadline === "function") {
      const now = new DateTime().time();
      rw.setReadDeadline(now.add(ms * 1000000)); // a Go time.Duration, in nanoseconds
      rw.setWriteDeadline(now.add((ms + ANSWER_MS) * 1000000));
      return true;
    }
    rw = typeof rw.unwrap === "function" ? rw.unwrap() : null;
  }
  return false;
}

module.exports = { allowBody: allowBody };
