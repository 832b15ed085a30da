// Drives Debian's Chromium (playwright-core, no downloaded browser) through the API reference page
// the OAuth round trip and the SPA page's sessions and TOTP, saving a screenshot of each. Usage:
//   node run.mjs <apiBase> <outDir> <expectedEmail> <spaUrl>
// Prints one JSON line: {docsOperations, me, finalUrl, spa}.
import { chromium } from 'playwright-core';

const [api, outDir, email, spaUrl] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
    '--disable-component-update', '--disable-sync'],
});
const result = {};
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  // The page's own errors go to stderr, so a failure says what the browser saw.
  page.on('pageerror', (e) => console.error('page error:', e.message));
  page.on('console', (m) => { if (m.type() === 'error') console.error('console:', m.text()); });
  await page.goto(`${api}/api/docs`);
  await page.waitForSelector('.opblock', { timeout: 60000 }).catch(async (e) => {
    await page.screenshot({ path: `${outDir}/docs-failed.png` });
    console.error('docs page text:', (await page.locator('body').textContent()).slice(0, 500));
    throw e;
  });
  result.docsOperations = await page.locator('.opblock').count();
  await page.screenshot({ path: `${outDir}/docs.png`, fullPage: false });

  // The whole OAuth round trip in a real browser: our login route, the (fake) provider, our
  // callback, then the frontend page, whose script reads the fragment and calls GET /api/me.
  await page.goto(`${api}/api/auth/login/github`);
  await page.waitForFunction((e) => document.querySelector('#me')?.textContent.includes(e), email, { timeout: 20000 });
  result.me = await page.locator('#me').textContent();
  result.finalUrl = page.url().split('#')[0];
  await page.screenshot({ path: `${outDir}/oauth.png` });

  // The SPA page: password sign-in, refresh, logout, TOTP enrolment and a sign-in with a code its
  // script computes; its outcome is the JSON in #result.
  await page.goto(spaUrl);
  await page.waitForFunction(() => document.querySelector('#result')?.textContent.length > 0, null, { timeout: 30000 });
  result.spa = JSON.parse(await page.locator('#result').textContent());
  await page.screenshot({ path: `${outDir}/spa.png` });
} finally {
  await browser.close();
}
console.log(JSON.stringify(result));
