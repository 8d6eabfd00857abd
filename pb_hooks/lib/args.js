// The one parser of what a request's body says, for every route of the pipeline and
// every outcome the settle route takes (lib/transitions.js): each function reads one
// field, checks it, and throws Invalid, which the routes answer 400 `invalid` with its
// message (lib/routes.js).

class Invalid extends Error {}

// H7: every number a route takes is a time in ms, a duration or a count; beyond the year
// 9999 none is meaningful, and a record holding one could no longer be saved from the panel.
const MAX_NUMBER = Date.UTC(9999, 11, 31);

const MAX_TEXT = 5000;

function whole(v, name) {
  if (typeof v !== "number" || !isFinite(v) || v < 0 || v > MAX_NUMBER) {
    throw new Invalid("'" + name + "' must be a number from 0 to " + MAX_NUMBER);
  }
  return Math.floor(v);
}

// A whole number from 0 to MAX_NUMBER (a fraction is floored), sent as a JSON number.
function number(body, name) {
  return whole(body[name], name);
}

// The same, also read from text: a form (multipart/form-data) sends every value as text.
function count(body, name) {
  const v = body[name];
  return whole(typeof v === "string" && v.trim() !== "" ? Number(v) : v, name);
}

// A count that may be left out (or sent empty): 0 then.
function optCount(body, name) {
  return body[name] === undefined || body[name] === "" ? 0 : count(body, name);
}

// A time (a JSON number) later than `now`.
function later(body, name, now) {
  const v = number(body, name);
  if (v <= now) throw new Invalid("'" + name + "' must be later than 'now'");
  return v;
}

// A number from 0 to 1.
function fraction(body, name) {
  const v = body[name];
  if (typeof v !== "number" || !isFinite(v) || v < 0 || v > 1) throw new Invalid("'" + name + "' must be a number from 0 to 1");
  return v;
}

// A text that must be there, cut to `max` characters.
function text(body, name, max) {
  const v = body[name];
  if (typeof v !== "string" || v === "") throw new Invalid("'" + name + "' is required");
  return v.slice(0, max || MAX_TEXT);
}

// A text that may be left out (null then), cut to `max` characters.
function optText(body, name, max) {
  const v = body[name];
  return v === undefined || v === null ? null : String(v).slice(0, max || MAX_TEXT);
}

module.exports = {
  Invalid: Invalid, number: number, count: count, optCount: optCount, later: later, fraction: fraction, text: text,
  optText: optText,
};
