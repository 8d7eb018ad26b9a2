package responses

import (
	"strconv"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/sse"
)

// A provider's web search (api.WebSearchCall deltas, which the adapters
// of providers with a search tool of their own write) is a web_search_call
// item: output_item.added and web_search_call.in_progress when it starts,
// web_search_call.searching once its query is known, then
// web_search_call.completed and output_item.done with its action
// ({"type":"search","query":…}), or output_item.done with status failed.
// Its citations (api.Annotation deltas, offsets in the characters of the
// whole answer) are url_citation annotations of the message item holding
// the text they cite, with output_text.annotation.added while it is open.

// appendSearch appends a web_search_call item's members after its id.
func appendSearch(b []byte, it *item, status string) []byte {
	if status == "incomplete" {
		status = "failed"
	}
	b = append(b, `,"type":"web_search_call","status":"`...)
	b = append(b, status...)
	b = append(b, `","action":{"type":"search","query":"`...)
	b = append(b, it.text...)
	return append(b, `"}}`...)
}

// searchCall handles one web search delta.
func (e *Encoder) searchCall(w *sse.Writer, c *api.WebSearchCall) error {
	i := -1
	for k := len(e.items) - 1; k >= 0; k-- {
		if it := &e.items[k]; it.kind == kindSearch && it.callID == c.ID {
			i = k
			break
		}
	}
	if i < 0 {
		if err := e.closeCur(w, "completed"); err != nil {
			return err
		}
		i = len(e.items)
		e.items = append(e.items, item{kind: kindSearch, open: true, callID: c.ID, id: e.m.itemID(kindSearch, i), text: escaped(nil, c.Query)})
		e.searching++
		if err := e.added(w, i); err != nil {
			return err
		}
		if err := e.searchEvent(w, evSearchInProgress, i); err != nil {
			return err
		}
	}
	it := &e.items[i]
	if !it.open {
		return nil
	}
	if c.Query != "" {
		it.text = escaped(it.text[:0], c.Query)
	}
	switch c.Status {
	case "searching":
		return e.searchEvent(w, evSearchSearching, i)
	case "completed":
		if err := e.searchEvent(w, evSearchCompleted, i); err != nil {
			return err
		}
		e.searching--
		return e.closeItem(w, i, "completed")
	case "failed":
		e.searching--
		return e.closeItem(w, i, "failed")
	}
	return nil
}

// searchEvent writes a web_search_call event of items[i].
func (e *Encoder) searchEvent(w *sse.Writer, name []byte, i int) error {
	b := e.ref(e.begin(name), i)
	return e.emit(w, name, append(b, '}'))
}

// annotation adds a citation to the message item whose text holds its
// start, the latest one that began at or before it.
func (e *Encoder) annotation(w *sse.Writer, a *api.Annotation) error {
	if a.Type != "url_citation" {
		return nil
	}
	for i := len(e.items) - 1; i >= 0; i-- {
		it := &e.items[i]
		if it.kind != kindMessage || it.base > a.URLCitation.StartIndex {
			continue
		}
		ann := it.annotate(a)
		if !it.open {
			return nil // in the response's output, too late for its events
		}
		b := e.ref(e.begin(evAnnotationAdded), i)
		b = append(b, `,"content_index":0,"annotation_index":`...)
		b = strconv.AppendInt(b, int64(it.nannot-1), 10)
		b = append(b, `,"annotation":`...)
		b = append(b, ann...)
		return e.emit(w, evAnnotationAdded, append(b, '}'))
	}
	return nil
}

// annotate adds a to the message item's annotations, its offsets made the
// item's own, and returns it as written.
func (it *item) annotate(a *api.Annotation) []byte {
	c := &a.URLCitation
	start, end := max(c.StartIndex-it.base, 0), max(c.EndIndex-it.base, 0)
	if it.nannot > 0 {
		it.annots = append(it.annots, ',')
	}
	n := len(it.annots)
	b := append(it.annots, `{"type":"url_citation","start_index":`...)
	b = strconv.AppendInt(b, int64(start), 10)
	b = append(b, `,"end_index":`...)
	b = strconv.AppendInt(b, int64(end), 10)
	b = append(b, `,"url":`...)
	b = api.AppendString(b, c.URL)
	b = append(b, `,"title":`...)
	b = api.AppendString(b, c.Title)
	it.annots = append(b, '}')
	it.nannot++
	return it.annots[n:]
}
