// H2, second pass: wrong passwords are counted per account, whatever the
// address they come from. PocketBase's limiter counts per address, so five
// addresses got five times its allowance for one account; here an account
// (or an identity no account has: the answer must not tell which) that met
// MAX_FAILURES wrong passwords in WINDOW_MS is refused with 429 and
// Retry-After until the window ends, the right password included (else the
// lock would tell a guesser when they got it right). A right password before
// that clears the count.
//
// The counts live in PocketBase's shared in-memory store (every JS runtime
// sees it; values are plain strings, which any runtime may read): a restart
// forgets them, as it forgets the per-address counts.
//
// The service account's collection is left to the per-address limit: its
// password is generated, and anyone knowing its fixed e-mail could otherwise
// keep the workers from signing in.
const respond = require(`${__hooks}/lib/respond.js`);

const MAX_FAILURES = 10;
const WINDOW_MS = 15 * 60 * 1000;
const EXEMPT = ["services"];
const PREFIX = "transcriber.loginFailures:";
const SWEEP_KEY = "transcriber.loginFailures#";
// Expired counts are swept every this many failures (an identity that never logs in again is not kept).
const SWEEP_EVERY = 256;

function keyOf(e) {
  const who = e.record ? "record:" + e.record.id : "identity:" + String(e.identity).trim().toLowerCase().slice(0, 255);
  return PREFIX + e.collection.id + ":" + who;
}

// "count,since" → {count, since}, or null when there is no count running at `now`.
function parse(value, now) {
  if (value === null || value === undefined || value === "") return null;
  const parts = String(value).split(",");
  const state = { count: parseInt(parts[0], 10) || 0, since: parseInt(parts[1], 10) || 0 };
  return now - state.since < WINDOW_MS ? state : null;
}

function countFailure(store, key, now) {
  store.setFunc(key, (old) => {
    const state = parse(old, now);
    return state ? (state.count + 1) + "," + state.since : "1," + now;
  });
  let n = 0;
  store.setFunc(SWEEP_KEY, (old) => {
    n = (parseInt(old, 10) || 0) + 1;
    return String(n % SWEEP_EVERY);
  });
  if (n % SWEEP_EVERY === 0) {
    for (const k of store.keys()) {
      if (String(k).indexOf(PREFIX) === 0 && parse(store.get(k), now) === null) store.remove(k);
    }
  }
}

function isWrongPassword(err) {
  const api = err && err.value;
  return api && api.status === 400;
}

// The onRecordAuthWithPasswordRequest handler: PocketBase found the account (or not) and checks the password in e.next().
function guard(e) {
  if (EXEMPT.indexOf(e.collection.name) >= 0) return e.next();
  const store = $app.store();
  const key = keyOf(e);
  const now = Date.now();
  const state = parse(store.get(key), now);
  if (state && state.count >= MAX_FAILURES) {
    const wait = Math.max(1, Math.ceil((state.since + WINDOW_MS - now) / 1000));
    // The request's own event: the auth event does not pass on its response writer.
    const req = e.requestEvent;
    req.response.header().set("Retry-After", String(wait));
    return respond.fail(req, 429, "too_many_failed_logins",
      "Too many wrong passwords for this account; try again in " + Math.ceil(wait / 60) + " minutes.");
  }
  try {
    e.next();
  } catch (err) {
    if (isWrongPassword(err)) countFailure(store, key, now);
    throw err;
  }
  if (state) store.remove(key);
}

module.exports = { guard: guard, MAX_FAILURES: MAX_FAILURES, WINDOW_MS: WINDOW_MS };
