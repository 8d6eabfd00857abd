// A password forgotten (#/forgot: a reset mail asked for), reset (#/reset/{token}: the mail's link)
// and changed (#/password, signed in).
import * as api from "./api.js";
import { accountForm, emailField, errorLine, h, sending, toast } from "./dom.js";
import { t } from "./i18n.js";
import {
  handleRefusal, loadOptions, main, passwordLength, passwordRefusal, refusalWords, restartLive, route, signOut, signedIn,
  state,
} from "./shell.js";

// The fields of a new password, twice; `value()` is it, or "" (and the error said) when the two differ
// or its length is not one the server takes.
function newPasswordFields(error) {
  const hint = h("p", { class: "hint", id: "new-password-hint" }, t("password.hint", passwordLength()));
  loadOptions().then(() => (hint.textContent = t("password.hint", passwordLength()))).catch(() => {});
  const fresh = h("input", { id: "new-password", type: "password", autocomplete: "new-password", required: true,
    "aria-describedby": "new-password-hint" });
  const again = h("input", { id: "repeat-password", type: "password", autocomplete: "new-password", required: true });
  return {
    nodes: [
      h("label", { for: "new-password" }, t("password.new")),
      fresh,
      hint,
      h("label", { for: "repeat-password" }, t("password.repeat")),
      again,
    ],
    value() {
      if (fresh.value !== again.value) {
        error.textContent = t("password.mismatch");
        again.focus();
        return "";
      }
      const refused = passwordRefusal(fresh.value);
      if (refused) {
        error.textContent = refused;
        fresh.focus();
        return "";
      }
      return fresh.value;
    },
  };
}

export function renderForgot() {
  state.view = "forgot";
  const error = errorLine("forgot");
  const submit = h("button", { type: "submit", class: "primary" }, t("forgot.submit"));
  const back = h("p", {}, h("a", { href: "#/" }, t("forgot.back")));
  const form = accountForm("forgot", t("forgot.title"), error, [
    h("p", { class: "lead" }, t("forgot.lead")),
    emailField("forgot-email", t("signin.email")),
    error,
    submit,
    back,
  ], async () => {
    const options = await loadOptions().catch(() => null);
    if (options && !options.password_reset) return noMail();
    const sent = await sending(submit, t("forgot.busy"), () => api.requestReset(form.email.value.trim()), (err) => {
      error.textContent = refusalWords(err, "");
    });
    // The same words whether or not an account has the address: the page tells nobody which exist.
    if (sent) form.replaceChildren(form.firstChild, h("p", { class: "notice", role: "status", id: "forgot-sent" }, t("forgot.sent")), back);
  });
  // Opened directly where the owner has set up no mail: nothing would be sent, so say what to do instead.
  const noMail = () =>
    form.replaceChildren(form.firstChild, h("p", { class: "notice", role: "status", id: "forgot-no-mail" }, t("forgot.noMail")), back);
  main().replaceChildren(form);
  loadOptions().then((options) => {
    if (!options.password_reset && state.view === "forgot") noMail();
  }).catch(() => {});
}

export function renderReset(token) {
  state.view = "reset";
  const error = errorLine("reset");
  const again = h("p", { hidden: true, id: "reset-again" }, h("a", { href: "#/forgot" }, t("reset.again")));
  const fields = newPasswordFields(error);
  const submit = h("button", { type: "submit", class: "primary" }, t("reset.submit"));
  const form = accountForm("reset", t("reset.title"), error, [
    h("p", { class: "lead" }, t("reset.lead")),
    fields.nodes,
    error,
    again,
    submit,
  ], async () => {
    const password = fields.value();
    if (!password) return;
    const sent = await sending(submit, t("password.busy"), () => api.confirmReset(token, password), (err) => {
      const data = err.data || {};
      if (data.password) error.textContent = t("error.weak_password", passwordLength());
      else if (data.token || err.status === 400) {
        error.textContent = t("reset.expired");
        again.hidden = signedIn();
      } else error.textContent = refusalWords(err, "");
    });
    if (!sent) return;
    // Every session of the account ended with the old password, this browser's too.
    state.notice = t("reset.done");
    if (signedIn()) return signOut();
    window.history.replaceState(null, "", "#/");
    route();
  });
  main().replaceChildren(form);
}

export function renderPassword() {
  state.view = "password";
  state.record = null;
  const error = errorLine("password");
  const fields = newPasswordFields(error);
  const current = h("input", { id: "current-password", type: "password", autocomplete: "current-password", required: true });
  const submit = h("button", { type: "submit", class: "primary" }, t("password.submit"));
  const form = accountForm("password", t("password.title"), error, [
    h("label", { for: "current-password" }, t("password.current")),
    current,
    fields.nodes,
    error,
    h("div", { class: "form-actions" }, submit, h("a", { href: "#/", class: "button" }, t("password.cancel"))),
  ], async () => {
    const password = fields.value();
    if (!password) return;
    const sent = await sending(submit, t("password.busy"), () => api.changePassword(current.value, password), (err) => {
      const words = handleRefusal(err, "");
      if (words !== null) error.textContent = words;
      return words === null; // signed out: the sign-in is on screen
    });
    if (!sent) return;
    restartLive();
    window.location.hash = "#/";
    toast(t("password.done"));
  });
  main().replaceChildren(form);
  current.focus();
}
