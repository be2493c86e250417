// Package chart draws the pictures of `rekey plan` as PNG, with the
// standard library's image/png and the 7×13 bitmap font of
// golang.org/x/image/font/basicfont, so a report needs no fonts, scripts
// or network to show them.
//
// Heatmap follows Spanner's Key Visualizer: time runs left to right, key
// ranges top to bottom in key order (the lowest keys at the top, each row
// labelled with its range's start key), and a cell's colour goes from
// near-black blue (cold) through purple, red, orange and yellow to white
// at the scale's maximum, linearly in the value. Bars along the bottom
// edge give the total of each time column and along the right edge the
// total of each key range. SideBySide draws a "before" and an "after" map
// at one colour scale and one bar scale, so a cell of the same value has
// the same colour in both and a hotspot that the rewrite removes shows as
// a white band on the left and none on the right.
//
// LineChart (e.g. achieved write rate against the ramp schedule) and
// BarChart (e.g. rewritten keys per key range) are plain charts with a
// few round tick values on their axes.
package chart
