// The sentence of "Real words as tokens" in each language, its words' four named features, and
// the hand-made W_q (what each kind of word looks for). No DOM: the learning worker uses it too.

// Features, in this order: animal, action, place, relation word. Head 1 of the multi-head section
// takes the first two dims, head 2 the last two.
export const E = 4;
export const SENTENCES = {
  en: [['the', [0, 0, 0, 0]], ['cat', [1, 0, 0, 0]], ['sat', [0, 1, 0, 0]], ['on', [0, 0, 0, 1]], ['the', [0, 0, 0, 0]], ['mat', [0, 0, 1, 0]]],
  zh: [['小猫', [1, 0, 0, 0]], ['坐', [0, 1, 0, 0]], ['在', [0, 0, 0, 1]], ['垫子', [0, 0, 1, 0]], ['上', [0, 0, 0, 1]]],
};
const C = 5;  // how strongly a word looks for a feature
// Row r: "looks for feature r"; column c: "the word has feature c". An action looks for an animal
// (who?) and a place (where?), an animal for an action (does what?), a relation word for a place,
// a place for a relation word.
export const WQ = Float32Array.from([
  0, C, 0, 0,
  C, 0, 0, 0,
  0, C, 0, C,
  0, 0, C, 0,
]);
export const IDENTITY = Float32Array.from({ length: E * E }, (_, e) => (e % (E + 1) === 0 ? 1 : 0));

// tokens, their embeddings [n, E], and which token is the action (sat / 坐) and the animal.
export function sentence(lang) {
  const words = SENTENCES[lang];
  const find = (feature) => words.findIndex(([, f]) => f[feature] === 1);
  return { tokens: words.map(([w]) => w), embedding: Float32Array.from(words.flatMap(([, f]) => f)), n: words.length,
    action: find(1), animal: find(0) };
}
