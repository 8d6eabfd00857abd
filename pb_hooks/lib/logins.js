// H2, third pass: wrong passwords are limited so that a stranger cannot turn
// the limit against the account's holder.
//
// - A device that signed in to the account holds a device token (OWASP's
//   "device cookies"): signed with the account's token key (a new password
//   voids them all), given at every password sign-in as the `X-Device-Token`
//   header and an HttpOnly cookie, presented back by the CLI (the header) and
//   the page (the cookie). A try that presents one is counted per (account,
//   device), by its own failures only: never refused because of others'.
// - Per (account, address) pair (a client with no device token): FREE wrong passwords, then a wait that
//   starts at BASE_MS and doubles with each further failure, up to CAP_MS;
//   while it runs, that pair's logins (the right password included, else the
//   wait would tell a guesser when they got it right) get 429
//   `too_many_failed_logins` with Retry-After. A right password clears it.
// - An address that signed in to the account before (login_addresses, kept
//   hashed in the database, so a restart does not forget it) is limited by
//   its own failures only: what other addresses do never locks it.
// - Every other address counts toward the account's window: ATTACK_AT
//   failures from such addresses within WINDOW_MS make an attack, and from
//   then until QUIET_MS pass without a try, such addresses together get
//   UNDER_ATTACK tries a window; the rest wait for the next window. A guess
//   spread over many addresses stays bounded; the holder's known addresses
//   are untouched. A client never seen on the account (no count of its own:
//   the holder's phone on a new network) has a lane of its own: FRESH tries
//   every FRESH_WINDOW_MS, which strangers' refused tries do not renew; it
//   closes to an address at its first wrong password, so a stranger needs a
//   new address for each of its tries. The owner is told: a line in PocketBase's log (the panel's
//   Logs) and on standard error, a `login_alerts` row, and the figures the
//   workers export as metrics (`figures`).
// - An identity no account has is counted the same way (keyed by what was
//   typed, and with no known address), so no answer tells which accounts
//   exist. The owner's (superuser) logins are guarded alike.
// - A signed-in session is never refused: only password checks pass here
//   (the login, and the old password of a change, lib/password.js).
//
// - The store is bounded: past MAX_KEYS entries, an address that opened more
//   than CROWD counts lately (a flood of made-up names) is refused; known
//   devices and addresses, and every other address, still sign in.
// - The owner lets an account in again (a row of login_unlocks: the panel, or
//   `transcriber user unlock EMAIL`): its counts are forgotten.
//
// The counts live in PocketBase's shared in-memory store (every JS runtime
// sees it; values are plain strings any runtime can read): a restart forgets
// them, as it forgets the per-address counts of PocketBase's own limiter. A
// stranger's failures cost memory, not writes: an attack's row is written
// when it starts, then with its counts at most once a minute (the cron in
// auth.pb.js) and when the owner opens the list.
//
// The service account's collection is left to the per-address limit: its
// password is generated (nothing to guess), its e-mail is fixed, and the
// workers on a new host sign in from an address it has never seen.

const respond = require("./respond.js");

const FREE = 5;
const BASE_MS = 1000;
const CAP_MS = 15 * 60 * 1000;
// A pair's count is forgotten this long after its last failure (its wait, at most CAP_MS, is over by then).
const PAIR_MEMORY_MS = 60 * 60 * 1000;
const WINDOW_MS = 15 * 60 * 1000;
const ATTACK_AT = 20;
const UNDER_ATTACK = 5;
const QUIET_MS = 15 * 60 * 1000;
// Past this many entries in the store, an address that opened more than CROWD new counts within
// PAIR_MEMORY_MS is refused (the flood's own addresses) rather than let its new pairs go uncounted; known
// devices and addresses, and addresses that opened few, are not (a holder's new phone opened none).
const MAX_KEYS = 200000;
const CROWD = 10;
const FULL_WAIT_MS = 60 * 1000;
// A client never seen on an account gets FRESH tries a FRESH_WINDOW_MS while the account's window is spent.
const FRESH = 3;
const FRESH_WINDOW_MS = 60 * 1000;
const DEVICE_HEADER = "X-Device-Token";
const DEVICE_COOKIE = "transcriber_device_";
const DAY_MS = 24 * 60 * 60 * 1000;
// Known addresses unseen this long are forgotten; a device token is good this long after its last sign-in.
const ADDRESS_MEMORY_MS = 180 * DAY_MS;
const DEVICE_MEMORY_MS = 180 * DAY_MS;
const EXEMPT = ["services"];

const P = "transcriber.login.";
const PAIR = P + "pair|";
const ACCOUNT = P + "account|";
const ALERTS = P + "alerts";
const STATS = P + "stats";
const PRUNED = P + "pruned";
const OPENED = P + "opened|";

// --- who and where -----------------------------------------------------------------------

// The account tried: its record, or, for an identity no account has, what was typed.
function whoOf(collection, record, identity) {
  const typed = String(identity || "").trim().toLowerCase().slice(0, 255);
  return {
    key: collection.id + "|" + (record ? "r:" + record.id : "i:" + typed),
    collection: collection.name,
    account: record ? record.id : "",
    identity: record ? record.email() : typed,
  };
}

// The address as PocketBase's own limiter sees it (realIP: the trusted proxy's header, when one is set
// in Settings, else the peer); an IPv6 address by its /64, which one host keeps while its address changes.
function addressOf(req) {
  const ip = String(req.realIP() || "");
  if (ip.indexOf(":") < 0) return ip;
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip);
  if (mapped) return mapped[1];
  const bare = ip.split("%")[0];
  const halves = bare.split("::");
  const head = halves[0] ? halves[0].split(":") : [];
  const tail = halves.length > 1 && halves[1] ? halves[1].split(":") : [];
  const gap = [];
  for (let i = head.length + tail.length; i < 8; i++) gap.push("0");
  const groups = head.concat(gap, tail).slice(0, 4);
  return groups.map((g) => (parseInt(g, 16) || 0).toString(16)).join(":") + "::/64";
}

function addressHash(who, address) {
  return $security.sha256(who.collection + "|" + who.account + "|" + address);
}

function dbTime(ms) {
  return new Date(ms).toISOString().replace("T", " ");
}

function msOf(value) {
  const s = String(value || "");
  return s === "" ? 0 : Date.parse(s.replace(" ", "T")) || 0;
}

// --- the trusted devices (signed tokens, nothing stored) -------------------------------------

// "v1.ISSUED.ID.SIGNATURE": the device's id and when it last signed in, signed with the account's token key.
function deviceSignature(record, issued, id) {
  return $security.hs256(record.collection().id + "|" + record.id + "|" + issued + "|" + id, record.tokenKey());
}

function deviceCookie(who) {
  return DEVICE_COOKIE + $security.sha256(who.key).slice(0, 16);
}

// The device's id if `token` is one this account signed and still good, else "".
function verifiedDevice(token, record, now) {
  const f = String(token || "").split(".");
  if (f.length !== 4 || f[0] !== "v1" || !/^[a-z0-9]{20}$/.test(f[2])) return "";
  const issued = parseInt(f[1], 10) || 0;
  if (issued <= 0 || now - issued > DEVICE_MEMORY_MS || issued - now > 60 * 1000) return "";
  return $security.equal(f[3], deviceSignature(record, f[1], f[2])) ? f[2] : "";
}

// The trusted device a try comes from (the header, else the cookie), or "".
function deviceOf(req, record, who, now) {
  if (!record) return "";
  const presented = [String(req.request.header.get(DEVICE_HEADER) || "")];
  try {
    presented.push(String(req.request.cookie(deviceCookie(who)).value || ""));
  } catch (_) {
    // no cookie
  }
  for (const token of presented) {
    const id = token ? verifiedDevice(token, record, now) : "";
    if (id) return id;
  }
  return "";
}

function isHttps(req) {
  const proto = String(req.request.header.get("X-Forwarded-Proto") || "").toLowerCase();
  return Boolean(req.request.tls) || proto === "https";
}

// The onRecordAuthRequest handler: a password sign-in's answer carries the device's token (its own, renewed,
// when it presented one), in the header for the CLI and in an HttpOnly cookie for the page.
function trustDevice(e) {
  if (e.authMethod !== "password" || !e.record || EXEMPT.indexOf(e.collection.name) >= 0) return e.next();
  const req = e.requestEvent; // the request's own event (as in `guard`)
  const now = Date.now();
  const who = whoOf(e.collection, e.record, "");
  const id = deviceOf(req, e.record, who, now) || $security.randomStringWithAlphabet(20, "abcdefghijklmnopqrstuvwxyz0123456789");
  const token = "v1." + now + "." + id + "." + deviceSignature(e.record, String(now), id);
  req.response.header().set(DEVICE_HEADER, token);
  req.setCookie(new Cookie({
    name: deviceCookie(who), value: token, path: "/api/", maxAge: DEVICE_MEMORY_MS / 1000,
    secure: isHttps(req), httpOnly: true, sameSite: 3, // Strict: sent by the page's own requests only
  }));
  return e.next();
}

// --- the known addresses (database) --------------------------------------------------------

// When the account last signed in from `address` (ms), or 0 if never.
function lastSeen(who, address) {
  if (who.account === "") return 0;
  const rows = arrayOf(new DynamicModel({ last_seen: "" }));
  $app.db().newQuery("SELECT last_seen FROM login_addresses WHERE collection = {:c} AND account = {:a} AND address = {:h} LIMIT 1")
    .bind({ c: who.collection, a: who.account, h: addressHash(who, address) }).all(rows);
  return rows.length > 0 ? Math.max(1, msOf(rows[0].last_seen)) : 0;
}

function remember(who, address, now) {
  if (who.account === "") return;
  try {
    $app.db().newQuery(
      "INSERT INTO login_addresses (id, collection, account, address, first_seen, last_seen) " +
      "VALUES ({:id}, {:c}, {:a}, {:h}, {:t}, {:t}) " +
      "ON CONFLICT (collection, account, address) DO UPDATE SET last_seen = excluded.last_seen",
    ).bind({
      id: $security.randomStringWithAlphabet(15, "abcdefghijklmnopqrstuvwxyz0123456789"),
      c: who.collection, a: who.account, h: addressHash(who, address), t: dbTime(now),
    }).execute();
  } catch (err) {
    // The login itself succeeded; the address is remembered at the next one.
    console.error("login guard: the address could not be remembered: " + err);
  }
}

// --- the counts (memory) -----------------------------------------------------------------

// "n,last,until,known": failures, the last one (ms), the end of the wait (ms), whether the address is known.
function readPair(value, now) {
  if (value === null || value === undefined || value === "") return null;
  const f = String(value).split(",");
  const s = { n: parseInt(f[0], 10) || 0, last: parseInt(f[1], 10) || 0, until: parseInt(f[2], 10) || 0, known: f[3] === "1" };
  return now - s.last < PAIR_MEMORY_MS || now < s.until ? s : null;
}

function writePair(s) {
  return s.n + "," + s.last + "," + s.until + "," + (s.known ? "1" : "0");
}

// The wait after a pair's n-th failure.
function waitAfter(n) {
  return n < FREE ? 0 : Math.min(BASE_MS * Math.pow(2, n - FREE), CAP_MS);
}

// An account's counts of failures from addresses it does not know (JSON): the window (`ws`, `wf`),
// whether an attack is on, and the attack's totals.
function readAccount(value, now) {
  if (value === null || value === undefined || value === "") return null;
  const s = JSON.parse(String(value));
  return now - s.last < Math.max(WINDOW_MS, QUIET_MS) ? s : null;
}

function freshAccount(now) {
  return { ws: now, wf: 0, attack: false, first: now, last: now, failures: 0, refused: 0, addrs: 0 };
}

function underAttack(s, now) {
  return Boolean(s && s.attack && now - s.last < QUIET_MS);
}

// How long addresses the account does not know wait (ms), 0 if they may try.
function budgetWait(s, now) {
  if (!s || now >= s.ws + WINDOW_MS) return 0;
  const allowed = underAttack(s, now) ? UNDER_ATTACK : ATTACK_AT;
  return s.wf >= allowed ? s.ws + WINDOW_MS - now : 0;
}

function bump(store, field) {
  store.setFunc(STATS, (old) => {
    const s = old ? JSON.parse(String(old)) : { failed: 0, refused: 0 };
    s[field] = (s[field] || 0) + 1;
    return JSON.stringify(s);
  });
}

// --- one password check ------------------------------------------------------------------
//
// A try is counted before its password is looked at (a slot of its pair and, from an address the
// account does not know, of the account's window), so that tries running at once cannot all slip
// through the last free slot; the right password gives the slots back.

// What is known before the password is looked at, the slots taken. `session`: the caller is signed
// in (a password change), so only its pair counts, not the account's window. `c.wait` > 0: refused.
function begin(req, collection, record, identity, session) {
  const store = $app.store();
  const now = Date.now();
  const who = whoOf(collection, record, identity);
  const address = addressOf(req);
  const device = session ? "" : deviceOf(req, record, who, now);
  const pairKey = PAIR + who.key + "|" + (device ? "d:" + device : address);
  const peek = readPair(store.get(pairKey), now);
  const seen = peek && !device ? 0 : lastSeen(who, address);
  const addressKnown = device ? seen > 0 : peek ? peek.known : seen > 0;
  const c = {
    store, now, who, address, pairKey, seen, device, addressKnown, known: device !== "" || addressKnown,
    session: Boolean(session), isNew: !peek,
    // No wrong password of its own on the account: the lane is open to it, once (its first failure ends it).
    fresh: !peek || peek.n === 0,
    wait: 0, pair: null, before: 0, windowTaken: false, laneTaken: false,
  };
  if (!peek && !c.known && opened(store, address, now) >= CROWD && store.length() >= MAX_KEYS) c.wait = FULL_WAIT_MS;
  else takePair(c);
  if (c.wait === 0 && !c.known && !c.session) takeWindow(c);
  if (c.wait > 0) refused(c);
  return c;
}

// How many new counts `address` opened within PAIR_MEMORY_MS ("n,first").
function opened(store, address, now) {
  const f = String(store.get(OPENED + address) || "").split(",");
  return now - (parseInt(f[1], 10) || 0) < PAIR_MEMORY_MS ? parseInt(f[0], 10) || 0 : 0;
}

function open(store, address, now) {
  store.setFunc(OPENED + address, (old) => {
    const f = String(old || "").split(",");
    const first = parseInt(f[1], 10) || 0;
    return now - first < PAIR_MEMORY_MS ? (parseInt(f[0], 10) || 0) + 1 + "," + first : "1," + now;
  });
}

// The pair's slot: refused while its wait runs, else counted now (and its next wait set).
function takePair(c) {
  if (c.isNew && !c.known) open(c.store, c.address, c.now);
  c.store.setFunc(c.pairKey, (old) => {
    const s = readPair(old, c.now) || { n: 0, last: c.now, until: 0, known: c.known };
    if (c.now < s.until) {
      c.wait = s.until - c.now;
      return writePair(s);
    }
    c.pair = { n: s.n, until: s.until }; // as it was, to give back
    c.before = s.n;
    s.n++;
    s.last = c.now;
    s.until = c.now + waitAfter(s.n);
    s.known = c.known;
    return writePair(s);
  });
}

function givePairBack(c) {
  if (!c.pair) return;
  const taken = c.pair.n + 1;
  c.store.setFunc(c.pairKey, (old) => {
    const s = readPair(old, c.now);
    if (!s) return old || "";
    if (s.n === taken) {
      s.n = c.pair.n;
      s.until = c.pair.until;
    } else if (s.n > 0) s.n--;
    return writePair(s);
  });
  c.pair = null;
}

// The account's window, for an address it does not know: refused while the window is spent, else a slot.
function takeWindow(c) {
  c.store.setFunc(ACCOUNT + c.who.key, (old) => {
    let s = readAccount(old, c.now);
    if (!s || (s.attack && !underAttack(s, c.now))) s = freshAccount(c.now);
    const wait = budgetWait(s, c.now);
    if (wait > 0) {
      // A client never seen on the account takes the lane of its own, if a slot of it is free.
      const lane = c.fresh ? laneWait(s, c.now) : wait;
      if (lane > 0) {
        c.wait = Math.min(wait, lane);
        return old || "";
      }
      if (!s.fs || c.now >= s.fs + FRESH_WINDOW_MS) {
        s.fs = c.now;
        s.ff = 0;
      }
      s.ff++;
      s.last = Math.max(s.last, c.now);
      c.laneTaken = s.fs;
      return JSON.stringify(s);
    }
    if (c.now >= s.ws + WINDOW_MS) {
      s.ws = c.now;
      s.wf = 0;
    }
    s.wf++;
    s.last = Math.max(s.last, c.now);
    c.windowTaken = s.ws;
    return JSON.stringify(s);
  });
  if (c.wait > 0) givePairBack(c);
}

// How long a client never seen on the account waits for a slot of its lane (ms), 0 if one is free.
function laneWait(s, now) {
  if (!s.fs || now >= s.fs + FRESH_WINDOW_MS) return 0;
  return s.ff >= FRESH ? s.fs + FRESH_WINDOW_MS - now : 0;
}

function giveWindowBack(c) {
  if (c.windowTaken === false && c.laneTaken === false) return;
  c.store.setFunc(ACCOUNT + c.who.key, (old) => {
    const s = readAccount(old, c.now);
    if (!s) return old || "";
    if (c.windowTaken !== false && s.ws === c.windowTaken && s.wf > 0) s.wf--;
    if (c.laneTaken !== false && s.fs === c.laneTaken && s.ff > 0) s.ff--;
    return JSON.stringify(s);
  });
  c.windowTaken = false;
  c.laneTaken = false;
}

// A try turned away before its password was looked at.
function refused(c) {
  const store = c.store;
  bump(store, "refused");
  if (c.known || c.session) return;
  let attacked = false;
  store.setFunc(ACCOUNT + c.who.key, (old) => {
    const s = readAccount(old, c.now);
    if (!s) return old || "";
    s.refused++;
    if (underAttack(s, c.now)) {
      s.last = c.now; // still going
      attacked = true;
    }
    return JSON.stringify(s);
  });
  if (attacked) addToAlert(store, c.who, { failures: 0, refused: 1, addrs: 0, first: c.now }, c.now);
}

// A wrong password: its slots stay taken, and the pair's wait runs from now (the check took a while).
function failed(c) {
  const store = c.store;
  bump(store, "failed");
  if (c.pair) {
    const at = Date.now();
    store.setFunc(c.pairKey, (old) => {
      const s = readPair(old, at);
      if (!s) return old || "";
      s.last = Math.max(s.last, at);
      s.until = Math.max(s.until, at + waitAfter(s.n));
      return writePair(s);
    });
  }
  if (c.windowTaken === false && c.laneTaken === false) return;
  const fresh = c.before === 0 ? 1 : 0; // the pair's first failure: an address new to this account's count
  let crossed = false;
  let snap = null;
  store.setFunc(ACCOUNT + c.who.key, (old) => {
    const s = readAccount(old, c.now) || freshAccount(c.now);
    s.failures++;
    s.addrs += fresh;
    s.last = Math.max(s.last, c.now);
    if (!s.attack && s.wf >= ATTACK_AT) {
      s.attack = true;
      crossed = true;
    }
    snap = s;
    return JSON.stringify(s);
  });
  // The attack's totals so far come along when it begins; what follows is added as it comes.
  if (crossed) addToAlert(store, c.who, snap, c.now);
  else if (snap.attack) addToAlert(store, c.who, { failures: 1, refused: 0, addrs: fresh, first: c.now }, c.now);
}

// The right password: the pair's count goes, the window's slot is given back, and the address is
// remembered (or its last sighting refreshed, at most once a day).
function succeeded(c) {
  c.store.remove(c.pairKey);
  c.pair = null;
  giveWindowBack(c);
  if (!c.addressKnown || (c.seen > 0 && c.now - c.seen > DAY_MS)) remember(c.who, c.address, c.now);
}

// Neither right nor wrong (PocketBase refused for another reason): the slots are given back.
function abandoned(c) {
  givePairBack(c);
  giveWindowBack(c);
}

function tooMany(req, waitMs) {
  const s = Math.max(1, Math.ceil(waitMs / 1000));
  req.response.header().set("Retry-After", String(s));
  const when = s < 120 ? s + " seconds" : Math.ceil(s / 60) + " minutes";
  return respond.fail(req, 429, "too_many_failed_logins", "Too many wrong passwords for this account; try again in " + when + ".");
}

function isWrongPassword(err) {
  const api = err && err.value;
  return Boolean(api && api.status === 400);
}

// The onRecordAuthWithPasswordRequest handler: PocketBase found the account (or not) and checks the
// password in e.next().
function guard(e) {
  if (EXEMPT.indexOf(e.collection.name) >= 0) return e.next();
  // The request's own event: the auth event does not pass on its response writer.
  const req = e.requestEvent;
  const c = begin(req, e.collection, e.record, e.identity, false);
  if (c.wait > 0) return tooMany(req, c.wait);
  try {
    e.next();
  } catch (err) {
    if (isWrongPassword(err)) failed(c);
    else abandoned(c);
    throw err;
  }
  succeeded(c);
}

// After a password reset confirmed with the mailed token: whoever holds the token holds the account,
// so the address it was confirmed from is the holder's (known from now on: an attack on the account
// does not keep them out), and its own count goes.
function resetConfirmed(e) {
  e.next();
  if (!e.record) return;
  const store = $app.store();
  const who = whoOf(e.collection, e.record, "");
  const address = addressOf(e.requestEvent);
  store.remove(PAIR + who.key + "|" + address);
  remember(who, address, Date.now());
}

// --- the owner is told -------------------------------------------------------------------

function alertKey(who) {
  return who.collection + "|" + (who.account || "-");
}

// Adds to the account's open alert (one for all identities no account has, per collection), opening
// one if there is none. A new alert is written and logged at once; the counts that follow are written
// by `flush`.
function addToAlert(store, who, counts, now) {
  const key = alertKey(who);
  let created = null;
  let replaced = null;
  store.setFunc(ALERTS, (old) => {
    const all = old ? JSON.parse(String(old)) : {};
    let a = all[key];
    if (a && now - a.last >= QUIET_MS) {
      replaced = a; // over, not yet closed by the cron: closed here
      a = null;
    }
    if (!a) {
      a = { id: newId(), collection: who.collection, account: who.account, identity: who.identity,
        failures: 0, refused: 0, addrs: 0, first: counts.first, last: now, written: "" };
      created = a;
    }
    a.failures += counts.failures;
    a.refused += counts.refused;
    a.addrs += counts.addrs;
    a.first = Math.min(a.first, counts.first);
    a.last = now;
    a.identity = who.identity;
    all[key] = a;
    return JSON.stringify(all);
  });
  if (replaced) closeAlert(replaced);
  if (created) {
    created.written = signature(created);
    writeAlert(created, true);
    const what = created.account ? "account " + created.account : "identities no account has";
    $app.logger().warn("Login attack: wrong passwords from addresses that never signed in to this account",
      "collection", created.collection, "account", created.account || "(no such account)", "identity", created.identity,
      "failures", created.failures, "addresses", created.addrs, "alert", created.id);
    console.warn("login attack on " + created.collection + " " + what + " (" + created.identity + "): " +
      created.failures + " wrong passwords from " + created.addrs + " addresses; login_alerts " + created.id);
  }
}

function signature(a) {
  return a.failures + "/" + a.refused + "/" + a.addrs + "/" + a.last;
}

function newId() {
  return $security.randomStringWithAlphabet(15, "abcdefghijklmnopqrstuvwxyz0123456789");
}

function writeAlert(a, ongoing) {
  try {
    let rec;
    try {
      rec = $app.findRecordById("login_alerts", a.id);
    } catch (_) {
      rec = new Record($app.findCollectionByNameOrId("login_alerts"));
      rec.set("id", a.id);
    }
    rec.set("collection", a.collection);
    rec.set("account", a.account);
    rec.set("identity", String(a.identity).slice(0, 255));
    rec.set("failures", a.failures);
    rec.set("refused", a.refused);
    rec.set("addresses", a.addrs);
    rec.set("first_seen", dbTime(a.first));
    rec.set("last_seen", dbTime(a.last));
    rec.set("ongoing", ongoing);
    $app.save(rec);
  } catch (err) {
    console.error("login guard: the alert " + a.id + " could not be written: " + err);
  }
}

function closeAlert(a) {
  writeAlert(a, false);
  $app.logger().info("Login attack over: no try for 15 minutes", "collection", a.collection,
    "account", a.account || "(no such account)", "failures", a.failures, "refused", a.refused,
    "addresses", a.addrs, "alert", a.id);
  console.log("login attack over on " + a.collection + " " + (a.account || "(no such account)") + ": " +
    a.failures + " wrong passwords, " + a.refused + " refused, from " + a.addrs + " addresses");
}

// Writes the open alerts' counts where they changed, and closes those quiet for QUIET_MS (also the
// rows a restart left open: their counts were in the memory it lost).
function flush() {
  const store = $app.store();
  const now = Date.now();
  const changed = [];
  const over = [];
  let open = 0;
  store.setFunc(ALERTS, (old) => {
    const all = old ? JSON.parse(String(old)) : {};
    for (const key of Object.keys(all)) {
      const a = all[key];
      if (now - a.last >= QUIET_MS) {
        over.push(a);
        delete all[key];
        continue;
      }
      open++;
      if (a.written !== signature(a)) {
        a.written = signature(a);
        changed.push(Object.assign({}, a));
      }
    }
    return JSON.stringify(all);
  });
  for (const a of changed) writeAlert(a, true);
  for (const a of over) closeAlert(a);
  return open;
}

function closeOrphans() {
  const all = JSON.parse(String($app.store().get(ALERTS) || "{}"));
  const live = Object.keys(all).map((k) => all[k].id);
  const rows = arrayOf(new DynamicModel({ id: "" }));
  $app.db().newQuery("SELECT id FROM login_alerts WHERE ongoing = TRUE").all(rows);
  for (const row of rows) {
    if (live.indexOf(row.id) >= 0) continue;
    try {
      const rec = $app.findRecordById("login_alerts", row.id);
      rec.set("ongoing", false);
      $app.save(rec);
    } catch (err) {
      console.error("login guard: the alert " + row.id + " could not be closed: " + err);
    }
  }
}

// Counts past their time go (an identity that never logs in again is not kept).
function sweep(now) {
  const store = $app.store();
  for (const k of store.keys()) {
    const key = String(k);
    if (key.indexOf(PAIR) === 0 && readPair(store.get(key), now) === null) store.remove(key);
    else if (key.indexOf(ACCOUNT) === 0 && readAccount(store.get(key), now) === null) store.remove(key);
    else if (key.indexOf(OPENED) === 0 && opened(store, key.slice(OPENED.length), now) === 0) store.remove(key);
  }
}

// Once an hour: known addresses unseen for ADDRESS_MEMORY_MS are forgotten.
function prune(now) {
  let due = false;
  $app.store().setFunc(PRUNED, (old) => {
    due = now - (parseInt(old, 10) || 0) >= 60 * 60 * 1000;
    return due ? String(now) : old;
  });
  if (!due) return;
  $app.db().newQuery("DELETE FROM login_addresses WHERE last_seen < {:cut}").bind({ cut: dbTime(now - ADDRESS_MEMORY_MS) }).execute();
}

// --- the owner lets an account in ------------------------------------------------------------

// Forgets every count of the account (its addresses' and devices' waits, the attack's window): its next
// sign-in from anywhere is looked at. The number of counts forgotten.
function unlock(collectionName, email) {
  const record = $app.findAuthRecordByEmail(collectionName, email);
  const who = whoOf(record.collection(), record, "");
  const store = $app.store();
  let forgotten = 0;
  for (const k of store.keys()) {
    const key = String(k);
    if (key === ACCOUNT + who.key || key.indexOf(PAIR + who.key + "|") === 0) {
      store.remove(key);
      forgotten++;
    }
  }
  return forgotten;
}

// A row of login_unlocks applied: the account's counts forgotten, the row marked.
function applyUnlock(row) {
  let outcome;
  try {
    const n = unlock(row.getString("collection"), row.getString("identity"));
    outcome = "unlocked: " + n + " count(s) forgotten";
  } catch (_) {
    outcome = "no such account";
  }
  row.set("applied", dbTime(Date.now()));
  row.set("outcome", outcome);
  $app.save(row);
  $app.logger().info("Login unlocked by the owner", "collection", row.getString("collection"),
    "identity", row.getString("identity"), "outcome", outcome);
}

// The rows written by `transcriber user unlock` (another process): applied at the cron's minute.
function applyUnlocks() {
  const rows = $app.findRecordsByFilter("login_unlocks", "applied = ''", "created", 100, 0);
  for (const row of rows) {
    try {
      applyUnlock(row);
    } catch (err) {
      console.error("login guard: the unlock " + row.id + " could not be applied: " + err);
    }
  }
}

// The panel's new row: the account must exist; applied at once.
function unlockRequested(e) {
  const collection = e.record.getString("collection");
  try {
    $app.findAuthRecordByEmail(collection, e.record.getString("identity"));
  } catch (_) {
    throw new BadRequestError("No account of " + collection + " has the e-mail " + e.record.getString("identity") + ".");
  }
  e.next();
  applyUnlock($app.findRecordById("login_unlocks", e.record.id));
}

// The cron's minute (auth.pb.js).
function tick() {
  const now = Date.now();
  applyUnlocks();
  flush();
  closeOrphans();
  sweep(now);
  prune(now);
}

// What the workers export as metrics (GET /api/pipeline/logins): failures and refusals since
// PocketBase started, and the accounts under attack now (identities no account has as one).
function figures() {
  const store = $app.store();
  const now = Date.now();
  const all = JSON.parse(String(store.get(ALERTS) || "{}"));
  const open = Object.keys(all).filter((k) => now - all[k].last < QUIET_MS).length;
  const s = JSON.parse(String(store.get(STATS) || "{}"));
  return { failed_logins: s.failed || 0, refused_logins: s.refused || 0, accounts_under_attack: open };
}

module.exports = {
  guard, resetConfirmed, trustDevice, unlock, unlockRequested, begin, failed, succeeded, tooMany, flush, tick, figures,
};
