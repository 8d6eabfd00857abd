// PocketBase's stored datetime form ("2026-01-02 03:04:05.678Z"), which sorts and
// compares as text, to and from unix ms (the unit of every time the hooks compare).

function dbTime(ms) {
  return new Date(ms).toISOString().replace("T", " ");
}

function msOf(text) {
  return Date.parse(String(text).replace(" ", "T"));
}

module.exports = { dbTime: dbTime, msOf: msOf };
