// Lighthouse (npm `lighthouse`) against the page, in Debian's headless Chromium: prints the
// accessibility and best-practices scores (0-100) and every scored audit that did not pass, as
// one JSON line. Usage: node lighthouse.mjs URL mobile|desktop
import lighthouse from "lighthouse";
import desktopConfig from "lighthouse/core/config/desktop-config.js";
import * as chromeLauncher from "chrome-launcher";

const [url, formFactor = "mobile"] = process.argv.slice(2);
const chrome = await chromeLauncher.launch({
  chromePath: process.env.CHROME_PATH || "/usr/bin/chromium",
  chromeFlags: ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
});
try {
  const flags = { port: chrome.port, output: "json", logLevel: "error", onlyCategories: ["accessibility", "best-practices"] };
  const result = await lighthouse(url, flags, formFactor === "desktop" ? desktopConfig : undefined);
  const lhr = result.lhr;
  const failed = [];
  for (const category of Object.values(lhr.categories)) {
    for (const ref of category.auditRefs) {
      const audit = lhr.audits[ref.id];
      if (ref.weight > 0 && audit.score !== null && audit.score < 1) {
        failed.push({ id: ref.id, title: audit.title, items: (audit.details && audit.details.items || []).slice(0, 3) });
      }
    }
  }
  console.log(JSON.stringify({
    form_factor: formFactor,
    accessibility: Math.round(lhr.categories.accessibility.score * 100),
    best_practices: Math.round(lhr.categories["best-practices"].score * 100),
    failed,
  }));
} finally {
  await chrome.kill();
}
