// JSON error answers in PocketBase's own shape, plus a stable `code`.
module.exports = {
  fail(e, status, code, message, data) {
    return e.json(status, { status: status, code: code, message: message, data: data || {} });
  },
  // PocketBase datetimes ("2026-01-02 03:04:05.678Z") as ISO 8601, "" as null.
  iso(value) {
    const s = String(value || "");
    return s === "" ? null : s.replace(" ", "T");
  },
  nowMs() {
    return Date.now();
  },
};
