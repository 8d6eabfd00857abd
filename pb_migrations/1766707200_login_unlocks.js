/// <reference path="../pb_data/types.d.ts" />
// The owner lets an account in again while strangers' wrong passwords keep its new devices waiting
// (pb_hooks/lib/logins.js): a row of login_unlocks names the account; the guard forgets every count
// of it (its addresses' waits and the attack's window) and marks the row applied. Created in the
// panel, the row is applied at once; written by `transcriber user unlock EMAIL` (a console command,
// another process), within a minute (the guard's cron). The rows stay as the record of who was let in.
migrate((app) => {
  const unlocks = new Collection({
    type: "base",
    name: "login_unlocks",
    fields: [
      { name: "identity", type: "email", required: true, help: "The account's e-mail." },
      { name: "collection", type: "select", required: true, maxSelect: 1, values: ["users", "_superusers"],
        help: "users for a sender, _superusers for the owner's own login." },
      { name: "applied", type: "date", help: "When the guard forgot the account's counts (empty: within a minute)." },
      { name: "outcome", type: "text", help: "What the guard did." },
      { name: "created", type: "autodate", onCreate: true, onUpdate: false },
      { name: "updated", type: "autodate", onCreate: true, onUpdate: true },
    ],
    indexes: ["CREATE INDEX idx_login_unlocks_applied ON login_unlocks (applied)"],
    listRule: null, viewRule: null, createRule: null, updateRule: null, deleteRule: null,
  });
  app.save(unlocks);
}, (app) => {
  app.delete(app.findCollectionByNameOrId("login_unlocks"));
});
