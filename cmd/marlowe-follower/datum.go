package main

import (
	"encoding/hex"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/marlowe-follower/follower/contracts/marlowe"
)

// maxDatumInput bounds what the datum commands read from stdin. The ledger's
// largest transaction is 16 KiB; hex and JSON text of any on-chain datum fit
// many times over.
const maxDatumInput = 16 << 20

func newDatumCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "datum",
		Short: "Convert Marlowe datums and redeemers between CBOR and JSON, and hash them",
		Long: "Convert Marlowe datums and redeemers between CBOR hex and JSON, and hash them.\n\n" +
			"Types: " + typeList() + ".\n" +
			"JSON is the Marlowe core format; plutus-data uses the cardano-cli detailed schema.",
	}
	cmd.AddCommand(newDatumDecodeCommand(), newDatumEncodeCommand(), newDatumHashCommand())
	return cmd
}

func typeList() string {
	names := make([]string, len(marlowe.DatumTypes))
	for i, t := range marlowe.DatumTypes {
		names[i] = string(t)
	}
	return strings.Join(names, ", ")
}

func readInput(cmd *cobra.Command) ([]byte, error) {
	in, err := io.ReadAll(io.LimitReader(cmd.InOrStdin(), maxDatumInput+1))
	if err != nil {
		return nil, fmt.Errorf("reading stdin: %w", err)
	}
	if len(in) > maxDatumInput {
		return nil, fmt.Errorf("input larger than %d bytes", maxDatumInput)
	}
	return in, nil
}

func datumTypeFlag(cmd *cobra.Command) (marlowe.DatumType, error) {
	name, _ := cmd.Flags().GetString("type")
	if name == "" {
		return "", usageErrorf("--type is required (one of %s)", typeList())
	}
	t, err := marlowe.ParseDatumType(name)
	if err != nil {
		return "", usageError{fmt.Errorf("--type: %w", err)}
	}
	return t, nil
}

func newDatumDecodeCommand() *cobra.Command {
	return newDatumFilterCommand("decode", "Read CBOR hex on stdin, write JSON on stdout", "CBOR",
		func(t marlowe.DatumType, in []byte) (string, error) {
			raw, err := marlowe.ParseHexInput(in)
			if err != nil {
				return "", err
			}
			js, err := marlowe.DecodeDatum(t, raw)
			return string(js), err
		})
}

func newDatumEncodeCommand() *cobra.Command {
	return newDatumFilterCommand("encode", "Read JSON on stdin, write canonical CBOR hex on stdout", "JSON",
		func(t marlowe.DatumType, in []byte) (string, error) {
			cbor, err := marlowe.EncodeDatum(t, in)
			return hex.EncodeToString(cbor), err
		})
}

// newDatumFilterCommand is decode or encode (name): stdin, whose format
// is input, converted for --type (datumFilter).
func newDatumFilterCommand(name, short, input string, convert func(t marlowe.DatumType, in []byte) (string, error)) *cobra.Command {
	cmd := &cobra.Command{
		Use:   name + " --type TYPE",
		Short: short,
		Args:  exactArgs(0),
		RunE:  datumFilter(convert),
	}
	cmd.Flags().String("type", "", "what the "+input+" holds: "+typeList())
	return cmd
}

// datumFilter is the run of decode and encode: stdin, converted for the
// --type given, is written on stdout as one line.
func datumFilter(convert func(t marlowe.DatumType, in []byte) (string, error)) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, _ []string) error {
		t, err := datumTypeFlag(cmd)
		if err != nil {
			return err
		}
		in, err := readInput(cmd)
		if err != nil {
			return err
		}
		out, err := convert(t, in)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s\n", out)
		return err
	}
}

func newDatumHashCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "hash",
		Short: "Read datum CBOR hex on stdin, write its blake2b-256 datum hash on stdout",
		Long: "Read datum CBOR hex on stdin and write its datum hash (blake2b-256 of exactly those\n" +
			"bytes, as the ledger computes it). The input must be one well-formed Plutus Data value.",
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			in, err := readInput(cmd)
			if err != nil {
				return err
			}
			raw, err := marlowe.ParseHexInput(in)
			if err != nil {
				return err
			}
			if _, err := marlowe.DecodeDatum(marlowe.TypePlutusData, raw); err != nil {
				return err
			}
			h := marlowe.DatumHash(raw)
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s\n", hex.EncodeToString(h[:]))
			return err
		},
	}
}
