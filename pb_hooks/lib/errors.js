// PocketBase's own errors, answered again with a `code` (see errors.pb.js).
const respond = require("./respond.js");

const CODES = {
  400: "bad_request",
  401: "unauthorized",
  403: "forbidden",
  404: "not_found",
  405: "method_not_allowed",
  413: "too_large",
  429: "too_many_requests",
};

// The window of a rate limit rule no label below matches (PocketBase's windows restart this many
// seconds after the last request let through: the longest wait there is).
const RATE_WINDOW_S = 10;

// The labels PocketBase's limiter looks for on a request, most specific first (its
// apis/record_auth.go: an auth collection's door is "<collection>:<action>", the password,
// OTP and OAuth2 logins also "<collection>:auth"; then "METHOD /path" and "/path").
function rateLabels(e) {
  const path = String(e.request.url.path);
  const labels = [];
  const door = /^\/api\/collections\/([^/]+)\/([a-z0-9-]+)$/.exec(path);
  if (door) {
    const action = door[2].replace(/-([a-z0-9])/g, (_, c) => c.toUpperCase()).replace(/Otp$/, "OTP").replace(/Oauth2$/, "OAuth2");
    const tags = [action];
    if (action.startsWith("authWith")) tags.push("auth");
    for (const tag of tags) labels.push(door[1] + ":" + tag);
    for (const tag of tags) labels.push("*:" + tag);
  }
  labels.push(e.request.method + " " + path, path);
  return labels;
}

// How long a request PocketBase's limiter refused waits at most: the duration of the rule it met.
function rateWindow(e) {
  const rules = $app.settings().rateLimits.rules;
  for (const label of rateLabels(e)) {
    for (const rule of rules) {
      if (rule.label === label) return rule.duration;
    }
  }
  return RATE_WINDOW_S;
}

function codeFor(e, status, data) {
  if (status === 400 && String(e.request.url.path).endsWith("/auth-with-password")) return "login_failed";
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
      ? "The upload is larger than the limit of " + Math.floor(require("./intake.js").maxUploadBytes() / 1048576) + " MB."
      : "The request is larger than the server accepts.";
  }
  if (status === 429) {
    const wait = rateWindow(e);
    e.response.header().set("Retry-After", String(wait));
    message = "Too many requests from this address; try again in " + wait + " seconds.";
  }
  return respond.fail(e, status, codeFor(e, status, data), message, data);
}

module.exports = { withCode: withCode };
