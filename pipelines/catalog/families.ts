// The eight workflow families and their options (spec/families.md). A condition with 4 options uses
// A–D, one with 6 uses A–F; the Python module of the same name implements them.
export const FAMILY_NAMES = [
  'classification',
  'regression',
  'clustering',
  'forecasting',
  'image_restoration',
  'retrieval',
  'beat_detection',
  'graph_link_prediction',
] as const;
export type FamilyName = (typeof FAMILY_NAMES)[number];

export const OPTION_LETTERS = ['A', 'B', 'C', 'D', 'E', 'F'] as const;
export type OptionLetter = (typeof OPTION_LETTERS)[number];

export interface FamilyDefinition {
  /** Mask widths the family supports. */
  dimensions: readonly (4 | 6)[];
  /** What each option does when on. */
  options: Partial<Record<OptionLetter, string>>;
  /** Prediction hash rule (spec/records.md 2): raw ndarray bytes, JSON of a dict, JSON of tolist(). */
  hashRule: 'raw_bytes' | 'json' | 'json_list';
}

export const FAMILIES: Record<FamilyName, FamilyDefinition> = {
  classification: {
    dimensions: [4, 6],
    hashRule: 'raw_bytes',
    options: {
      A: 'signed-log feature transform sign(x)*log1p(|x|)',
      B: 'StandardScaler fitted on the training rows',
      C: "LogisticRegression class_weight='balanced'",
      D: 'LogisticRegression C=0.05 instead of 1.0',
      E: 'SelectPercentile(f_classif, 50) after the scaler',
      F: "PCA(0.95, svd_solver='full') after the selection",
    },
  },
  regression: {
    dimensions: [4, 6],
    hashRule: 'raw_bytes',
    options: {
      A: 'log1p/expm1 target transform (TransformedTargetRegressor)',
      B: 'StandardScaler (RobustScaler when F=1 in d6)',
      C: 'degree-2 PolynomialFeatures without bias',
      D: 'Ridge alpha 10 instead of 1',
      E: 'interaction-only degree-2 terms (inactive when C=0)',
      F: 'RobustScaler instead of StandardScaler (inactive when B=0)',
    },
  },
  clustering: {
    dimensions: [4, 6],
    hashRule: 'raw_bytes',
    options: {
      A: 'signed-log feature transform',
      B: 'StandardScaler',
      C: "PCA(0.95, svd_solver='full')",
      D: 'KMeans n_init 10 instead of 1',
      E: 'PCA whitening (inactive when C=0)',
      F: "KMeans init 'random' instead of 'k-means++'",
    },
  },
  forecasting: {
    dimensions: [4, 6],
    hashRule: 'raw_bytes',
    options: {
      A: 'linear time-trend feature t/cut',
      B: 'lags 1..12 instead of lag 1',
      C: 'log1p transform with expm1 inverse',
      D: 'Ridge alpha 10 instead of 1',
      E: 'RobustScaler instead of StandardScaler',
      F: 'model first differences, invert with the last realised level',
    },
  },
  image_restoration: {
    dimensions: [4, 6],
    hashRule: 'raw_bytes',
    options: {
      A: 'median filter 3x3 (5x5 when F=1 in d6)',
      B: 'Gaussian filter sigma 0.8 (1.6 when E=1 in d6)',
      C: 'Wiener filter 5x5',
      D: 'unsharp masking, amount 0.5, sigma 1',
      E: 'Gaussian sigma 1.6 instead of 0.8 (inactive when B=0)',
      F: 'median window 5 instead of 3 (inactive when A=0)',
    },
  },
  retrieval: {
    dimensions: [4, 6],
    hashRule: 'json',
    options: {
      A: 'unigrams and bigrams',
      B: "sklearn 'english' stop words removed",
      C: 'sublinear tf 1+log(tf) (inactive when E=1 in d6)',
      D: 'smoothed IDF weighting',
      E: 'binary term counts',
      F: 'no vector normalisation instead of L2',
    },
  },
  beat_detection: {
    dimensions: [6],
    hashRule: 'json_list',
    options: {
      A: 'zero-phase Butterworth high-pass 0.5 Hz',
      B: 'zero-phase Butterworth low-pass 35 Hz',
      C: 'squared first difference envelope instead of |w|',
      D: 'moving average of the envelope (120 ms)',
      E: 'robust median/MAD peak threshold instead of mean+std',
      F: 'refractory distance 300 ms instead of 200 ms',
    },
  },
  graph_link_prediction: {
    dimensions: [6],
    hashRule: 'json_list',
    options: {
      A: 'common-neighbour count feature',
      B: 'Jaccard coefficient feature',
      C: 'Adamic–Adar index feature',
      D: 'resource-allocation index feature',
      E: 'preferential-attachment feature',
      F: 'StandardScaler fitted on the calibration pairs',
    },
  },
};
