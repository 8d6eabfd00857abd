// POST /api/transcriber/password {"old_password": "…", "password": "…"}: a
// signed-in sender sets a new password. A route of ours rather than an
// update rule on `users`: senders reach no collection (SPEC ST3), and a rule
// narrow enough to allow only this would have to list every other field of
// the account, forever. Here a wrong old password counts as a failed login
// (lib/logins.js, the pair of this account and this address), PocketBase's
// own save refreshes the account's token key (every other session is signed
// out), and the answer is a fresh token for this session, as a login's is.
const logins = require("./logins.js");
const respond = require("./respond.js");

// How long a password of `collection` may be, in characters.
function lengthLimits(collection) {
  const field = collection.fields.getByName("password");
  // PocketBase's own bounds when the field names none: bcrypt reads 72 bytes at most.
  return { min: field && field.min > 0 ? field.min : 1, max: field && field.max > 0 ? field.max : 71 };
}

function change(e) {
  let body = null;
  try {
    body = e.requestInfo().body || {};
  } catch (_) {
    body = null;
  }
  if (!body || typeof body.old_password !== "string" || typeof body.password !== "string" || body.old_password === "") {
    return respond.fail(e, 400, "invalid_request", "Send a JSON object with the 'old_password' and the new 'password'.");
  }
  const user = $app.findRecordById("users", e.auth.id);
  const collection = user.collection();
  const check = logins.begin(e, collection, user, "", true);
  if (check.wait > 0) return logins.tooMany(e, check.wait);
  if (!user.validatePassword(body.old_password)) {
    logins.failed(check);
    return respond.fail(e, 400, "wrong_password", "The current password is wrong.");
  }
  logins.succeeded(check);
  const limits = lengthLimits(collection);
  const chars = Array.from(body.password).length;
  if (chars < limits.min || chars > limits.max) {
    return respond.fail(e, 400, "weak_password",
      "The new password must be " + limits.min + " to " + limits.max + " characters long.", limits);
  }
  user.setPassword(body.password);
  try {
    $app.save(user);
  } catch (err) {
    return respond.fail(e, 400, "weak_password", "The new password is not accepted: " + String(err), limits);
  }
  // The saved row (its new token key) signs this session's new token: the old one is void now.
  return $apis.recordAuthResponse(e, $app.findRecordById("users", user.id), "");
}

module.exports = { change, lengthLimits };
