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

// bcrypt, which PocketBase hashes passwords with, takes 72 bytes at most (Go's refuses more): a
// password is bounded in bytes of UTF-8 as well as in characters, and a letter outside English
// takes two to four of them.
const MAX_BYTES = 72;
// This route's whole body (two passwords in JSON, escaped or not), refused past it before it is read.
const BODY_BYTES = 4 * 1024;
// Any body sent to an auth door (sign-in, reset, verification, e-mail change: auth.pb.js): no
// password, token or address comes near it.
const DOOR_BODY_BYTES = 64 * 1024;

// How long a password of `collection` may be: {min, max} in characters (as PocketBase's
// field counts them) and max_bytes, bcrypt's bound.
function lengthLimits(collection) {
  const field = collection.fields.getByName("password");
  // PocketBase's own bounds when the field names none (71: any ASCII password fits bcrypt).
  return { min: field && field.min > 0 ? field.min : 1, max: field && field.max > 0 ? field.max : 71, max_bytes: MAX_BYTES };
}

// Why `password` cannot be a password of `limits`: {code, message, data} for a 400, or null.
// Its bytes are counted as bcrypt counts them, then its characters.
function refusal(password, limits) {
  const bytes = toBytes(password).length;
  const chars = Array.from(password).length;
  const data = { min: limits.min, max: limits.max, max_bytes: limits.max_bytes, bytes: bytes, chars: chars };
  if (bytes > limits.max_bytes) {
    return { code: "weak_password", data: data, message: "The new password is " + bytes + " bytes long in UTF-8 (" +
      chars + " characters); at most " + limits.max_bytes + " bytes are accepted, and a letter outside English " +
      "takes 2 to 4 bytes." };
  }
  if (chars < limits.min || chars > limits.max) {
    return { code: "weak_password", data: data,
      message: "The new password must be " + limits.min + " to " + limits.max + " characters long (and at most " +
        limits.max_bytes + " bytes)." };
  }
  return null;
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
  const refused = refusal(body.password, limits);
  if (refused) return respond.fail(e, 400, refused.code, refused.message, refused.data);
  user.setPassword(body.password);
  try {
    $app.save(user);
  } catch (err) {
    return respond.fail(e, 400, "weak_password", "The new password is not accepted: " + String(err), limits);
  }
  // The saved row (its new token key) signs this session's new token: the old one is void now.
  return $apis.recordAuthResponse(e, $app.findRecordById("users", user.id), "");
}

// A reset confirmed with a mailed token (PocketBase's confirm-password-reset, before it saves): a
// password over bcrypt's bytes is refused as the field's own errors are, not with bcrypt's.
function checkReset(e) {
  let body = {};
  try {
    body = e.requestInfo().body || {};
  } catch (_) {
    return;
  }
  if (typeof body.password !== "string" || body.password === "") return;
  const limits = lengthLimits(e.collection);
  if (toBytes(body.password).length > limits.max_bytes) {
    const refused = refusal(body.password, limits);
    throw new BadRequestError(refused.message, { password: { code: "validation_too_many_bytes", message: refused.message } });
  }
}

module.exports = { change, checkReset, lengthLimits, BODY_BYTES, DOOR_BODY_BYTES };
