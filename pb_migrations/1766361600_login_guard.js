/// <reference path="../pb_data/types.d.ts" />
// H2, third pass: wrong passwords are limited per (account, address), and a
// stranger can no longer lock an account's holder out (pb_hooks/lib/logins.js).
//
// - login_addresses: the addresses each account signed in from (hashed with
//   the account, never kept in the clear). Failures from other addresses never
//   lock these; kept in the database so that a restart does not forget them.
// - login_alerts: one row per attack on an account (or, together, on
//   identities no account has), counted in memory and written in aggregate
//   (at its start, then at most once a minute and when the owner looks), so a
//   stranger's thousands of failures are not thousands of writes.
//
// Both are the owner's alone (no rule opens them); the hooks write them, the
// panel only reads (pb_hooks/auth.pb.js refuses creates and edits).
//
// The users' password-reset mail links to the sender's page (`#/reset/TOKEN`),
// which has the form, instead of the panel's own page for superusers.
const RESET_BODY = `<p>Hello,</p>
<p>Someone (we hope you) asked to set a new password for your {APP_NAME} account.
Follow the link below to choose one; it is good for a short while.</p>
<p><a class="btn" href="{APP_URL}/#/reset/{TOKEN}" target="_blank" rel="noopener">Set a new password</a></p>
<p><i>If you did not ask for this, ignore this message: your password stays as it is.</i></p>
<hr>
<p>Здравствуйте!</p>
<p>Кто-то (надеемся, вы) попросил сменить пароль вашей учётной записи {APP_NAME}.
Перейдите по ссылке выше, чтобы выбрать новый; она действует недолго.</p>
<p><i>Если вы этого не просили, ничего не делайте: пароль останется прежним.</i></p>`;
const RESET_SUBJECT = "{APP_NAME}: set a new password / новый пароль";

migrate((app) => {
  const addresses = new Collection({
    type: "base",
    name: "login_addresses",
    fields: [
      { name: "collection", type: "text", required: true, help: "The account's collection (users or _superusers)." },
      { name: "account", type: "text", required: true, help: "The account's id." },
      { name: "address", type: "text", required: true,
        help: "SHA-256 of the collection, the account and the address it signed in from (an IPv6 address by its /64)." },
      { name: "first_seen", type: "date" },
      { name: "last_seen", type: "date", help: "Refreshed at most once a day; unseen for 180 days, the address is forgotten." },
    ],
    indexes: [
      "CREATE UNIQUE INDEX idx_login_addresses_key ON login_addresses (collection, account, address)",
      "CREATE INDEX idx_login_addresses_seen ON login_addresses (last_seen)",
    ],
    listRule: null, viewRule: null, createRule: null, updateRule: null, deleteRule: null,
  });
  app.save(addresses);

  const alerts = new Collection({
    type: "base",
    name: "login_alerts",
    fields: [
      { name: "collection", type: "text", required: true, help: "The collection signed in to (users or _superusers)." },
      { name: "account", type: "text", help: "The account's id; empty for identities no account has (counted together)." },
      { name: "identity", type: "text", help: "The identity (email) last tried." },
      { name: "failures", type: "number", onlyInt: true, min: 0,
        help: "Wrong passwords from addresses the account never signed in from." },
      { name: "refused", type: "number", onlyInt: true, min: 0, help: "Tries turned away without a look at the password." },
      { name: "addresses", type: "number", onlyInt: true, min: 0, help: "Addresses they came from." },
      { name: "first_seen", type: "date" },
      { name: "last_seen", type: "date" },
      { name: "ongoing", type: "bool", help: "Still going: a try within the last 15 minutes." },
      { name: "created", type: "autodate", onCreate: true, onUpdate: false },
      { name: "updated", type: "autodate", onCreate: true, onUpdate: true },
    ],
    indexes: ["CREATE INDEX idx_login_alerts_ongoing ON login_alerts (ongoing)"],
    listRule: null, viewRule: null, createRule: null, updateRule: null, deleteRule: null,
  });
  app.save(alerts);

  const users = app.findCollectionByNameOrId("users");
  users.resetPasswordTemplate.subject = RESET_SUBJECT;
  users.resetPasswordTemplate.body = RESET_BODY;
  app.save(users);
}, (app) => {
  app.delete(app.findCollectionByNameOrId("login_alerts"));
  app.delete(app.findCollectionByNameOrId("login_addresses"));
  const users = app.findCollectionByNameOrId("users");
  users.resetPasswordTemplate.subject = "Reset your {APP_NAME} password";
  users.resetPasswordTemplate.body = "<p>Hello,</p>\n<p>Click on the button below to reset your password.</p>\n<p>\n" +
    "  <a class=\"btn\" href=\"{APP_URL}/_/#/auth/confirm-password-reset/{TOKEN}\" target=\"_blank\" rel=\"noopener\">" +
    "Reset password</a>\n</p>\n<p><i>If you didn't ask to reset your password, please ignore this email.</i></p>\n" +
    "<p>\n  Thanks,<br/>\n  {APP_NAME} team\n</p>";
  app.save(users);
});
