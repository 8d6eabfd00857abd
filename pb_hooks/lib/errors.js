// PocketBase's own errors, answered again with a `code` (see errors.pb.js).

const CODES = {
  400: "bad_request",
  401: "unauthorized",
  403: "forbidden",
  404: "not_found",
  405: "method_not_allowed",
  413: "too_large",
  429: "too_many_requests",
};

// PocketBase's rate limit rules count in windows of this many seconds (see the login limits migration).
const RATE_WINDOW_S = 10;

function codeFor(e, status, data) {
  if (status === 400 && /\/auth-with-password$/.test(e.request.url.path)) return "login_failed";
  if (status === 400 && data && Object.keys(data).length > 0) return "invalid_data";
  return CODES[status] || "error";
}

function withCode(e, err) {
  const api = err && err.value;
  const status = api && typeof api.status === "number" ? api.status : 0;
  if (status < 400 || status >= 500) throw err; // not a client error: PocketBase's handler answers
  const data = api.data || {};
  let message = String(api.message || "");
  if (status === 413) {
    message = e.request.url.path === "/api/transcriber/records"
      ? "The upload is larger than the limit of " + Math.floor(require(`${__hooks}/lib/intake.js`).maxUploadBytes() / 1048576) + " MB."
      : "The request is larger than the server accepts.";
  }
  if (status === 429) {
    e.response.header().set("Retry-After", String(RATE_WINDOW_S));
    message = "Too many requests from this address; wait a few seconds and try again.";
  }
  return require(`${__hooks}/lib/respond.js`).fail(e, status, codeFor(e, status, data), message, data);
}

module.exports = { withCode: withCode };
