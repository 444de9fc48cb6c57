// Prettier (`npm run format`, checked by `npm run lint`), set to the style the code already has:
// single quotes, semicolons, trailing commas, two spaces. printWidth 160 touches the fewest existing
// lines: narrower widths split more of them, wider ones start joining lines wrapped by hand. Measured
// on the tree as files rewritten / existing lines changed / lines written:
//   120: 134 / 1,550 / 5,973   140: 108 / 833 / 3,248   160: 84 / 661 / 1,757
//   180:  80 /   708 / 1,078   200:  75 / 751 /   762
/** @type {import('prettier').Config} */
export default {
  printWidth: 160,
  singleQuote: true,
  semi: true,
  trailingComma: 'all',
  tabWidth: 2,
};
