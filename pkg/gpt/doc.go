// Package gpt is the GPT-2 style model: configuration and presets, the flat
// parameter layout, forward and an explicit backward over a device.Device.
package gpt
