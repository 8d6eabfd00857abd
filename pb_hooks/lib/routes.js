// Shared request plumbing for the pipeline routes (service user only).
const respond = require(`${__hooks}/lib/respond.js`);
const queue = require(`${__hooks}/lib/queue.js`);

// Runs fn(body) and maps the protocol's errors to clear answers:
// 409 fenced_out when the caller's claim is gone, 400 for a bad request.
function handle(e, fn) {
  const body = e.requestInfo().body || {};
  try {
    return fn(body);
  } catch (err) {
    if (err instanceof queue.Fenced) {
      return respond.fail(e, 409, "fenced_out", "This claim is no longer yours: " + err.message + ".");
    }
    if (err instanceof queue.Invalid) {
      return respond.fail(e, 400, "invalid", err.message + ".");
    }
    throw err;
  }
}

// Multipart values arrive as strings; JSON as numbers.
function num(body, name) {
  const v = body[name];
  if (typeof v === "string" && v.trim() !== "") body[name] = Number(v);
  return queue.intArg(body, name);
}

function optNum(body, name) {
  return body[name] === undefined || body[name] === "" ? 0 : num(body, name);
}

function optStr(body, name, max) {
  const v = body[name];
  return v === undefined || v === null ? null : String(v).slice(0, max || 5000);
}

module.exports = { handle: handle, num: num, optNum: optNum, optStr: optStr };
