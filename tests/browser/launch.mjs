// The headless Chromium every browser test drives: Debian's, or the one KILN_CHROMIUM names.
// No sandbox: the tests run as root, where Chromium's sandbox refuses to start.
import { chromium } from "playwright-core";

export function launchBrowser() {
  return chromium.launch({
    executablePath: process.env.KILN_CHROMIUM || "/usr/bin/chromium",
    args: ["--no-sandbox"],
  });
}
