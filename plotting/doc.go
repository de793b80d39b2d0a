// Package plotting draws druto's records with gonum/plot: loss curves,
// speed-ups, throughput, memory, utilisation and bandwidth, with English or
// Bangla labels shaped correctly, shown inline in GoNB or saved to files.
package plotting
