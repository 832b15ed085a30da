// Drives Debian's Chromium (playwright-core, no downloaded browser) through the API reference page
// and the OAuth round trip, saving a screenshot of each. Usage:
//   node run.mjs <apiBase> <outDir> <expectedEmail>
// Prints one JSON line: {docsOperations, me, finalUrl}.
import { chromium } from 'playwright-core';

const [api, outDir, email] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
    '--disable-component-update', '--disable-sync'],
});
const result = {};
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  await page.goto(`${api}/api/docs`);
  await page.waitForSelector('.opblock', { timeout: 20000 });
  result.docsOperations = await page.locator('.opblock').count();
  await page.screenshot({ path: `${outDir}/docs.png`, fullPage: false });

  // The whole OAuth round trip in a real browser: our login route, the (fake) provider, our
  // callback, then the frontend page, whose script reads the fragment and calls GET /api/me.
  await page.goto(`${api}/api/auth/login/github`);
  await page.waitForFunction((e) => document.querySelector('#me')?.textContent.includes(e), email, { timeout: 20000 });
  result.me = await page.locator('#me').textContent();
  result.finalUrl = page.url().split('#')[0];
  await page.screenshot({ path: `${outDir}/oauth.png` });
} finally {
  await browser.close();
}
console.log(JSON.stringify(result));
