// The pipeline routes' plumbing (service user only): the request's body in, the
// protocol's errors out as clear answers, and the fenced route in one place.
const args = require("./args.js");
const respond = require("./respond.js");
const followups = require("./followups.js");
const settle = require("./settle.js");

// Runs fn(body) and maps the protocol's errors to clear answers:
// 409 fenced_out when the caller's claim is gone, 400 for a bad request.
function handle(e, fn) {
  const body = e.requestInfo().body || {};
  try {
    return fn(body);
  } catch (err) {
    if (err instanceof settle.Fenced) {
      return respond.fail(e, 409, "fenced_out", "This claim is no longer yours: " + err.message + ".");
    }
    if (err instanceof args.Invalid) {
      return respond.fail(e, 400, "invalid", err.message + ".");
    }
    throw err;
  }
}

// The queue a route's path names: /api/pipeline/records/… or a follow-up's, /api/pipeline/insights/….
function tableOf(e) {
  const name = e.request.url.path.split("/")[3];
  return followups.of(name) ? name : "audio_records";
}

// A route that writes under the caller's claim on the row {id} of `table`: `read(body)`
// (optional) takes the request's arguments, so that a bad request is refused whoever holds
// the claim; then `write(tx, rec, a, body)`, given what `read` returned, runs in one
// transaction only while the body's `token` is the row's claim token (else 409
// fenced_out). Answers 200 with what `write` returns.
function fenced(e, table, read, write) {
  const id = e.request.pathValue("id");
  return handle(e, (body) => {
    const token = args.text(body, "token", 100);
    const a = read ? read(body) : null;
    return e.json(200, settle.underFence($app, table, id, token, (tx, rec) => write(tx, rec, a, body)));
  });
}

module.exports = { handle: handle, tableOf: tableOf, fenced: fenced };
