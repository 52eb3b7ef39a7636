// Every page's chrome: the light/dark toggle (auto follows prefers-color-scheme; a choice is kept in
// localStorage and set as <html data-theme>) and copy-on-click for ids ([data-copy]).

const KEY = "otel-session-theme";
const CHOICES = ["auto", "dark", "light"];
const LABELS = { auto: "◐ Auto", dark: "● Dark", light: "○ Light" };

function stored() {
  try {
    const value = localStorage.getItem(KEY);
    return CHOICES.includes(value) ? value : "auto";
  } catch {
    return "auto"; // storage refused (a file:// page in some browsers): the theme still follows the system
  }
}

function apply(choice) {
  if (choice === "auto") delete document.documentElement.dataset.theme;
  else document.documentElement.dataset.theme = choice;
  const toggle = document.getElementById("theme-toggle");
  if (toggle) {
    toggle.textContent = LABELS[choice];
    toggle.dataset.choice = choice;
    toggle.title = "Colour theme: auto follows the system; click to change";
  }
}

apply(stored());
document.getElementById("theme-toggle")?.addEventListener("click", () => {
  const next = CHOICES[(CHOICES.indexOf(stored()) + 1) % CHOICES.length];
  try {
    localStorage.setItem(KEY, next);
  } catch {
    // not kept across pages, applied all the same
  }
  apply(next);
});

document.addEventListener("click", async (event) => {
  const target = event.target instanceof Element ? event.target.closest("[data-copy]") : null;
  if (!target || event.defaultPrevented) return;
  try {
    await navigator.clipboard.writeText(target.dataset.copy);
    target.classList.add("copied");
    setTimeout(() => target.classList.remove("copied"), 900);
  } catch {
    // the clipboard is not offered here (not a secure context): the title still shows the whole id
  }
});
