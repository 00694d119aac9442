"""What a call carries out, after its tool ran: the value turned into what is recorded and shown
(`results`), placed by precedence (`placement`, `text_preview`), named by its ref line
(`reflines`) and recorded (`recording`)."""
